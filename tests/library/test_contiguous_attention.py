from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    prompt_logits,
)

from spyre_adapters.library.contiguous_attention import adapter

FAMILIES = families("contiguous-attention")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, causal_lm, model_type)
    assert_same_greedy(stock, adapted, atol=0.0)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_kernels_receive_contiguous_qkv(monkeypatch: pytest.MonkeyPatch, attn: str) -> None:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = causal_lm("llama", attn_implementation=attn)
    seen: list[bool] = []
    kernel = ALL_ATTENTION_FUNCTIONS.get_interface(attn, None)
    if kernel is None:  # eager lives in the modeling module, not the registry
        from transformers.models.llama import modeling_llama

        kernel = modeling_llama.eager_attention_forward

    def spy(
        module: torch.nn.Module,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *a: Any,
        **kw: Any,
    ) -> Any:
        seen.append(all(t.is_contiguous() for t in (q, k, v)))
        return kernel(module, q, k, v, *a, **kw)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._local_mapping, attn, spy)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    assert not any(seen)  # stock: transposed views
    seen.clear()
    apply(adapter, model)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    assert all(seen)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, causal_lm("llama"), prompt_logits)


def test_does_not_match_models_without_the_attention_interface() -> None:
    assert not adapter.matches(causal_lm("mamba"))
