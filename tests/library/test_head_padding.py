from __future__ import annotations

import pytest
import torch
from library_models import (
    PROMPT,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    prompt_logits,
)

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.head_padding import adapter, half_placement
from spyre_adapters.library.rope import adapter as rope

FAMILIES = families("head-padding", "1.0.0")  # 1.x: the version this module tests


def _roped(model_type: str) -> torch.nn.Module:
    model = causal_lm(model_type)
    apply(rope, model)
    return model


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = causal_lm(model_type), _roped(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert not adapter.matches(adapted), "an adapted model must not match again"
    assert_same_greedy(stock, adapted)


def test_heads_are_128_wide_and_the_scale_is_kept() -> None:
    model = _roped("llama")
    attention = model.model.layers[0].self_attn
    scaling = attention.scaling
    widths: list[int] = []
    apply(adapter, model)
    attention.q_proj.register_forward_hook(lambda _m, _i, out: widths.append(out.shape[-1]))
    with torch.no_grad():
        model(PROMPT)
    assert attention.head_dim == 128
    assert attention.scaling == scaling == 16**-0.5
    assert widths == [4 * 128]


def test_placement_puts_each_rotary_half_in_its_own_stick() -> None:
    assert half_placement(16) == (*range(8), *range(64, 72))
    assert half_placement(64) == (*range(32), *range(64, 96))


def test_needs_rope_rotation_first_and_declines_per_head_norms() -> None:
    assert not adapter.matches(causal_lm("llama"))  # stock RoPE: nothing to re-lay out
    assert not adapter.matches(_roped("qwen3"))  # q_norm / k_norm over the head dim
    assert not adapter.matches(_roped("phi"))  # the body slices rotary_ndims itself
    assert not adapter.matches(causal_lm("llama", head_dim=128, hidden_size=256))


def test_rollback_restores_the_model_exactly() -> None:
    model = causal_lm("llama")
    edit = ModelEdit(model)
    rope.apply(model, edit)

    assert_rollback_exact(adapter, model, prompt_logits)
    edit.rollback()
    assert_same_greedy(causal_lm("llama"), model)
