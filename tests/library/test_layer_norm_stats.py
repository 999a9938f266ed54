"""layernorm-two-pass: every version equivalent to the stock module and rolled back exactly;
1.0.1's own behaviour (no fused kernel, no pow, no upcast; matched by behaviour; contiguous
output). What each later version changes is tested in the files named after it."""

from __future__ import annotations

import pytest
import torch
from library_models import (
    PIXELS,
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    cosine,
    every_version,
    families,
    last_hidden,
    prompt_logits,
    recording,
    vision_model,
)

from spyre_adapters.contract import Adapter
from spyre_adapters.library.layer_norm_stats import adapter

VISION = {"vit", "clip_vision_model", "dinov2"}
EVERY_VERSION: dict[str, Adapter] = every_version("layernorm-two-pass")
CASES = [
    pytest.param(version, model_type, id=f"{version}-{model_type}")
    for version in EVERY_VERSION
    for model_type in families("layernorm-two-pass", version)
]


@pytest.mark.parametrize(("version", "model_type"), CASES)
def test_same_results_as_stock(version: str, model_type: str) -> None:
    chosen: Adapter = EVERY_VERSION[version]
    if model_type in VISION:
        stock, adapted = vision_model(model_type), vision_model(model_type)
        assert chosen.matches(adapted)
        apply(chosen, adapted)
        ref = last_hidden(stock, pixel_values=PIXELS)
        out = last_hidden(adapted, pixel_values=PIXELS)
        assert cosine(out, ref) >= 0.9999
        return
    stock, adapted = adapted_pair(chosen, causal_lm, model_type)
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("version", list(EVERY_VERSION))
def test_rollback_restores_the_model_exactly(version: str) -> None:
    assert_rollback_exact(EVERY_VERSION[version], causal_lm("gpt2"), prompt_logits)


def test_forward_has_no_fused_layer_norm() -> None:
    model = causal_lm("gpt2")
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    with recording(within=norms) as seen:
        model(PROMPT, use_cache=False)
    assert "aten.native_layer_norm" in seen.ops
    apply(adapter, model)
    with recording(within=norms) as seen:
        model(PROMPT, use_cache=False)
    assert "aten.native_layer_norm" not in seen.ops
    assert "aten.pow" not in seen.ops
    assert "aten._to_copy" not in seen.ops  # no fp32 upcast either


def test_custom_layer_norms_are_matched_by_behaviour() -> None:
    olmo = causal_lm("olmo")
    cohere = causal_lm("cohere")
    apply(adapter, olmo)
    apply(adapter, cohere)
    assert "forward" in olmo.model.layers[0].input_layernorm.__dict__
    assert "forward" in cohere.model.layers[0].input_layernorm.__dict__


def test_constant_rows_give_the_bias_not_nan() -> None:
    norm = torch.nn.LayerNorm(64)
    with torch.no_grad():
        norm.bias.copy_(torch.linspace(-1, 1, 64))
    holder = torch.nn.Sequential(norm)
    apply(adapter, holder)
    holder.half()
    rows = torch.full((3, 64), 7.25, dtype=torch.float16)
    rows[:, ::2] += 0.004  # near-constant: one-pass variance would cancel
    out = holder(rows)
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all()


def test_does_not_match_rms_norm_models() -> None:
    assert not adapter.matches(causal_lm("llama"))


def test_output_is_contiguous_for_a_permuted_input_like_the_fused_kernel() -> None:
    norm = torch.nn.LayerNorm(64)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 64))
        norm.bias.copy_(torch.linspace(-1, 1, 64))
    stock, holder = torch.nn.Sequential(norm), torch.nn.Sequential(torch.nn.LayerNorm(64))
    holder.load_state_dict(stock.state_dict())
    apply(adapter, holder)
    # a dense but permuted input, as a pixel shuffle or a transposed projection gives
    x = torch.randn(2, 64, 16).permute(0, 2, 1)
    ref, out = stock(x), holder(x)
    assert ref.is_contiguous()
    assert out.is_contiguous()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert out.view(2, 4, 4, 64).shape == (2, 4, 4, 64)  # what GraniteDocling does next
