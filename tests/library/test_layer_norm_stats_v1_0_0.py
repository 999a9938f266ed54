"""layernorm-two-pass 1.0.0, shipped again next to 1.0.1 and 2.0.0: equivalent to the stock
module, and different from 1.0.1 exactly where 1.0.1 changed it (the output's strides)."""

from __future__ import annotations

import pytest
import torch
from library_models import (
    PIXELS,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    cosine,
    families,
    last_hidden,
    prompt_logits,
    vision_model,
)

from spyre_adapters.library.layer_norm_stats_v1_0_0 import adapter

FAMILIES = families("layernorm-two-pass")
VISION = {"vit", "clip_vision_model", "dinov2"}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_results_as_stock(model_type: str) -> None:
    if model_type in VISION:
        stock, adapted = vision_model(model_type), vision_model(model_type)
        apply(adapter, adapted)
        ref = last_hidden(stock, pixel_values=PIXELS)
        out = last_hidden(adapted, pixel_values=PIXELS)
        assert cosine(out, ref) >= 0.9999
        return
    stock, adapted = adapted_pair(adapter, causal_lm, model_type)
    assert_same_greedy(stock, adapted)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, causal_lm("gpt2"), prompt_logits)


def test_keeps_a_permuted_layout_where_1_0_1_returns_a_contiguous_tensor() -> None:
    # The reason 1.0.1 exists: the same values, but the permuted strides of the input.
    stock, holder = (
        torch.nn.Sequential(torch.nn.LayerNorm(64)),
        torch.nn.Sequential(torch.nn.LayerNorm(64)),
    )
    holder.load_state_dict(stock.state_dict())
    apply(adapter, holder)
    x = torch.randn(2, 64, 16).permute(0, 2, 1)
    ref, out = stock(x), holder(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert ref.is_contiguous()
    assert not out.is_contiguous()
