"""host-mask 1.0.0, shipped again next to 1.0.1: still equivalent to the stock model where it
was, and different from 1.0.1 exactly where 1.0.1 changed it (PaliGemma's skipped mask)."""

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
    cosine,
    families,
    prompt_logits,
    vision_language_model,
)

from spyre_adapters.library.host_mask import adapter as adapter_1_0_1
from spyre_adapters.library.host_mask_v1_0_0 import adapter, finite_fill

FAMILIES = families("host-mask", "1.0.0")
SLIDING = {"mistral", "qwen2", "gemma2", "gemma3_text", "starcoder2"}
EAGER_ONLY = {"gemma2"}


def _model(model_type: str, attn: str = "sdpa") -> torch.nn.Module:
    extra: dict[str, Any] = {"attn_implementation": "eager" if model_type in EAGER_ONLY else attn}
    if model_type in SLIDING:
        extra["sliding_window"] = 4
    return causal_lm(model_type, **extra)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, _model, model_type)
    assert_same_greedy(stock, adapted)


def test_attention_gets_a_materialised_finite_mask() -> None:
    model = _model("llama")
    seen: list[object] = []

    def grab(_: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append(kwargs.get("attention_mask"))

    for name, module in model.named_modules():
        if name.endswith(".self_attn"):
            module.register_forward_pre_hook(grab, with_kwargs=True)
    apply(adapter, model)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    for mask in seen:
        assert isinstance(mask, torch.Tensor)
        assert mask.min().item() == finite_fill(torch.float32)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _model("llama"), prompt_logits)


def test_differs_from_1_0_1_where_a_skipped_mask_means_full_attention() -> None:
    # The reason 1.0.1 exists: PaliGemma's Gemma (is_causal = False) attends to every position
    # when its mask is skipped; 1.0.0 builds a causal mask there, 1.0.1 keeps it skipped.
    stock = vision_language_model("paligemma")
    old, new = vision_language_model("paligemma"), vision_language_model("paligemma")
    apply(adapter, old)
    apply(adapter_1_0_1, new)
    with torch.no_grad():
        ref = stock(PROMPT).logits
        out_old = old(PROMPT).logits
        out_new = new(PROMPT).logits
    torch.testing.assert_close(out_new, ref)
    assert cosine(out_old, ref) < 0.999
