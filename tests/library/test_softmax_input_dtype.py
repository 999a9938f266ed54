from __future__ import annotations

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    cosine,
    families,
    prompt_logits,
    recording,
)

from spyre_adapters.library.contiguous_attention import adapter as contiguous
from spyre_adapters.library.softmax_input_dtype import InputDtypeSoftmaxMode, adapter

FAMILIES = families("softmax-input-dtype")


def _eager(model_type: str) -> torch.nn.Module:
    return causal_lm(model_type, attn_implementation="eager")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, _eager, model_type)
    assert_same_greedy(stock, adapted, atol=0.0)  # fp32: the mode changes nothing


@pytest.mark.parametrize(
    ("model_type", "blocks"),
    [
        ("gemma2", ("self_attn",)),
        ("llama", ("self_attn",)),
        ("bloom", ("self_attention",)),
        ("gpt_neo", ("attention",)),
        ("mixtral", ("gate",)),
    ],
)
def test_half_precision_blocks_have_no_casts_and_stay_close(
    model_type: str, blocks: tuple[str, ...]
) -> None:
    stock = _eager(model_type).to(torch.bfloat16)
    model = _eager(model_type).to(torch.bfloat16)
    attention = [m for n, m in model.named_modules() if n.endswith(blocks)]
    assert attention
    with torch.no_grad():
        ref = stock(PROMPT, use_cache=False).logits
    with recording(within=attention) as seen:
        model(PROMPT, use_cache=False)
    assert "aten._to_copy" in seen.ops
    apply(adapter, model)
    with recording(within=attention) as seen:
        out = model(PROMPT, use_cache=False).logits
    assert "aten._to_copy" not in seen.ops
    assert cosine(out.float(), ref.float()) >= 0.999


def test_mode_only_touches_half_precision_upcasts() -> None:
    x = torch.randn(3, 5)
    with InputDtypeSoftmaxMode():
        full = torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32)
        half = torch.nn.functional.softmax(x.half(), dim=-1, dtype=torch.float32)
        kept = (x.half().float(), x.half().to(torch.float32), x.half().to(dtype=torch.float32))
        moved = x.half().to(torch.float64)
        ints = torch.arange(3).float()
    assert torch.equal(full, torch.nn.functional.softmax(x, dim=-1))
    assert half.dtype == torch.float16
    assert all(t.dtype == torch.float16 for t in kept)
    assert moved.dtype == torch.float64
    assert ints.dtype == torch.float32


def test_composes_with_contiguous_attention() -> None:
    stock, adapted = _eager("llama"), _eager("llama")
    apply(contiguous, adapted)
    apply(adapter, adapted)
    assert not contiguous.matches(adapted)
    assert_same_greedy(stock, adapted, atol=0.0)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _eager("gemma2"), prompt_logits)


def test_does_not_match_models_without_softmax_in_their_code() -> None:
    assert not adapter.matches(causal_lm("llama"))  # SDPA: the softmax is inside the kernel
