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
    recording,
)

from spyre_adapters.library.fused_projection import ProjectionParts, SplitProjection, adapter
from spyre_adapters.library.rope import adapter as rope

FAMILIES = families("fused-projection-split", "1.0.0")  # 1.x: the version this module tests
SPLITS = {"aten.split", "aten.split_with_sizes", "aten.chunk", "aten.slice"}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = causal_lm(model_type), causal_lm(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert any(isinstance(m, SplitProjection) for m in adapted.modules())
    assert not adapter.matches(adapted), "an adapted model must not match again"
    assert_same_greedy(stock, adapted)


def test_composes_with_rope_rotation() -> None:
    stock, adapted = causal_lm("phi3"), causal_lm("phi3")
    apply(adapter, adapted)
    apply(rope, adapted)
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize(
    ("model_type", "blocks"),
    [("gpt2", ("attn", "mlp")), ("phi3", ("mlp",)), ("gpt_neox", ("attention",))],
)
def test_blocks_no_longer_slice(model_type: str, blocks: tuple[str, ...]) -> None:
    model = causal_lm(model_type)
    if model_type == "gpt_neox":
        apply(rope, model)  # its partial-rotary slices are rope-rotation's business
    watched = [m for n, m in model.named_modules() if n.rpartition(".")[2] in blocks]
    with recording(within=watched) as seen:
        model(PROMPT, use_cache=False)
    assert SPLITS & seen.ops
    apply(adapter, model)
    with recording(within=watched) as seen:
        model(PROMPT, use_cache=False)
    assert not SPLITS & seen.ops


def test_conv1d_becomes_linear() -> None:
    from transformers.pytorch_utils import Conv1D

    model = causal_lm("gpt2")
    apply(adapter, model)
    assert not any(isinstance(m, Conv1D) for m in model.modules())
    assert isinstance(model.transformer.h[0].mlp.c_fc, torch.nn.Linear)


def test_parts_refuse_cuts_off_their_boundaries() -> None:
    parts = ProjectionParts((torch.ones(2, 3, 4), torch.zeros(2, 3, 4), torch.ones(2, 3, 8)))
    q, k, v = parts.split([4, 4, 8], dim=-1)
    assert (q.shape[-1], k.shape[-1], v.shape[-1]) == (4, 4, 8)
    assert parts[..., 4:8] is parts.parts[1]
    assert parts.shape == torch.Size((2, 3, 16))
    with pytest.raises(ValueError, match="part boundaries"):
        parts.split(8, dim=-1)
    with pytest.raises(ValueError, match="part boundaries"):
        parts[..., 2:6]
    with pytest.raises(ValueError, match="part boundaries"):
        parts.split([4, 4, 8], dim=0)


@pytest.mark.parametrize("model_type", ["gpt2", "phi3"])
def test_rollback_restores_the_model_exactly(model_type: str) -> None:
    assert_rollback_exact(adapter, causal_lm(model_type), prompt_logits)


def test_does_not_match_unfused_models() -> None:
    assert not adapter.matches(causal_lm("llama"))  # separate q/k/v/gate/up projections


def test_head_major_parts_only_answer_the_head_view() -> None:
    # GPT-NeoX layout: per head [q_h | k_h | v_h]; 2 heads of width 2
    fused = torch.arange(12.0).view(1, 1, 12)
    heads = fused.view(1, 1, 2, 6)
    parts = ProjectionParts(
        tuple(heads[..., i * 2 : (i + 1) * 2].reshape(1, 1, 4) for i in range(3)), groups=2
    )
    with pytest.raises(ValueError, match="part boundaries"):
        parts.chunk(3, dim=-1)  # the flat layout is head-major: a flat chunk would be wrong
    q, k, v = parts.view(1, 1, -1, 6).transpose(1, 2).chunk(3, dim=-1)
    ref_q, ref_k, ref_v = heads.transpose(1, 2).chunk(3, dim=-1)
    assert torch.equal(q, ref_q)
    assert torch.equal(k, ref_k)
    assert torch.equal(v, ref_v)
