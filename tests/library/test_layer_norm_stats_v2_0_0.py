"""layernorm-two-pass 2.0.0: two-pass statistics in fp32 from 2026.07, where the stack holds fp32
inside norms. Closer to the stock module than 1.x in fp16, never NaN, and on the device it runs
from 2026.07 and not before (its equivalence and rollback, with every version's:
tests/library/test_layer_norm_stats.py)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from library_models import (
    PROMPT,
    apply,
    causal_lm,
    cosine,
    recording,
)

from spyre_adapters.library.layer_norm_stats import adapter as adapter_1_0_1
from spyre_adapters.library.layer_norm_stats_v2_0_0 import adapter


def _fp16_norm() -> torch.nn.Module:
    torch.manual_seed(0)
    holder = torch.nn.Sequential(torch.nn.LayerNorm(256))
    with torch.no_grad():
        holder[0].weight.normal_(1.0, 0.5)
        holder[0].bias.normal_(0.0, 0.5)
    return holder.half()


def test_in_fp16_it_gives_the_stock_numbers_where_1_0_1_rounds_its_statistics() -> None:
    stock = _fp16_norm()
    new, old = copy.deepcopy(stock), copy.deepcopy(stock)
    apply(adapter, new)
    apply(adapter_1_0_1, old)
    x = (torch.randn(4, 16, 256, generator=torch.Generator().manual_seed(1)) * 2 + 30).half()
    with torch.no_grad():
        ref, out_new, out_old = stock(x), new(x), old(x)
    assert out_new.dtype == torch.float16
    ulp = 2.0**-10 * 4  # one fp16 ulp at |y| in [4, 8), the largest outputs here
    assert (out_new.float() - ref.float()).abs().max().item() <= ulp
    differ_new = int((out_new != ref).sum())
    differ_old = int((out_old != ref).sum())
    # measured: 33 of 16384 outputs one ulp off with 2.0.0, 14922 off with 1.0.1
    assert differ_new * 100 < differ_old


def test_constant_rows_give_the_bias_not_nan() -> None:
    holder = _fp16_norm()
    apply(adapter, holder)
    rows = torch.full((3, 256), 7.25, dtype=torch.float16)
    rows[:, ::2] += 0.004
    with torch.no_grad():
        out = holder(rows)
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all()


def test_no_fused_layer_norm_and_an_fp32_upcast_for_fp16_inputs() -> None:
    model = causal_lm("gpt2").half()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    apply(adapter, model)
    with recording(within=norms) as seen:
        model(PROMPT, use_cache=False)
    assert "aten.native_layer_norm" not in seen.ops
    assert "aten._to_copy" in seen.ops  # the fp32 statistics: what 2.0.0 changes


def _device_logits(model: torch.nn.Module, release: str) -> torch.Tensor:
    import spyre_sim

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process downcast notices
        model = model.half().to("spyre")
        with spyre_sim.use_stack(release), torch.no_grad():
            ids = PROMPT.to("spyre")
            mask = torch.ones_like(PROMPT).to("spyre")
            return model(ids, attention_mask=mask, use_cache=False).logits.cpu().float()


@pytest.mark.parametrize("release", ["2026.07", "2026.09"])
def test_resolved_from_2026_07_and_matches_the_cpu_on_the_device(release: str) -> None:
    pytest.importorskip("spyre_sim")
    import spyre_adapters

    model = causal_lm("gpt2", n_embd=256)
    with torch.no_grad():
        ref = model(PROMPT, attention_mask=torch.ones_like(PROMPT)).logits
    spyre_adapters.prepare(model, release)
    applied = {a.name: str(a.version) for a in spyre_adapters.applied(model)}
    # the newest of the 2.x line is resolved (2.1.0: 2.0.0's numbers, without the input copy,
    # and LayerNorm subclasses with forwards of their own too)
    assert applied["layernorm-two-pass"] == "2.1.0"
    logits = _device_logits(model, release)
    assert cosine(logits, ref) >= 0.99
    assert torch.equal(logits.argmax(-1), ref.argmax(-1))


def test_its_range_starts_where_the_stack_holds_fp32_in_norms() -> None:
    """At 2026.06 the fp32 upcast is still a gap: 2.0.0 would not run there."""
    spyre_sim = pytest.importorskip("spyre_sim")
    import spyre_adapters

    model = causal_lm("gpt2", n_embd=256)
    prepared = spyre_adapters.prepare(model, "2026.06")
    assert {a.name: str(a.version) for a in prepared.applied}["layernorm-two-pass"] == "1.1.0"
    spyre_adapters.restore(model)
    apply(adapter, model)
    with pytest.raises(spyre_sim.SpyreLoweringError) as info:
        _device_logits(model, "2026.06")
    assert info.value.gap == "dtype-cast"
