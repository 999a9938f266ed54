"""head-padding 2.8.0 and stick-align-padding 2.4: the stick-layout rewrites with selections that
keep infinities and NaN where the stock op keeps them (``_exact_selection``,
``_stick_layout_exact``).

A 0/1 selection matmul multiplies every dropped element by 0, and ``0 * inf`` is NaN: the first
generation turned a row holding one infinity or NaN into NaN. The exact selections give the stock
cut, split and write for every input; on finite inputs the device gives 2.7.0's and 2.3's results
bit for bit; on the CPU the adapted model is the stock one; rollback is exact.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import test_stick_layout_chain as chain
import torch
from library_models import apply, prompt_logits
from packaging.version import Version
from test_stick_layout import _calls
from test_stick_layout_chain import _BUILD, _llama, _upto
from test_stick_layout_views_as import CHAIN_2_MODES, chained_modes
from torch import nn

import spyre_sim
from spyre_adapters.library import _exact_selection, _stick_layout, _stick_layout_exact
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.stick_align_v2_3 import stick_align_padding as align_v2_3
from spyre_adapters.library.stick_align_v2_4 import stick_align_padding
from spyre_adapters.library.stick_layout_v2_7_0 import head_padding as v2_7
from spyre_adapters.library.stick_layout_v2_8_0 import head_padding
from spyre_sim import telemetry

_V2_7 = {"head-padding": Version("2.7.0"), "stick-align-padding": Version("2.3.0")}
_RENAMES = {"head-padding 2.7.0": "head-padding 2.8.0",
            "stick-align-padding 2.3.0": "stick-align-padding 2.4.0"}  # fmt: skip
_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shapes, dtypes and elements, NaN matching NaN and each infinity its sign."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and torch.equal(torch.isnan(a), torch.isnan(b))
        and torch.equal(a.nan_to_num(0.0, 7.0, -7.0), b.nan_to_num(0.0, 7.0, -7.0))
        and torch.equal(torch.isinf(a), torch.isinf(b))
    )


def _with_non_finite(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    flat = x.view(-1, shape[-1])
    flat[0, -1] = float("-inf")  # a masked column a cut drops
    flat[1, 1] = float("inf")
    flat[-1, 2] = float("nan")
    flat[-1, 0] = float("-inf")
    return x


# --- the selections -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize(("start", "length"), [(0, 3), (1, 4), (3, 2), (2, 1)])
def test_select_columns_is_the_slice_for_every_value(
    dtype: torch.dtype, start: int, length: int
) -> None:
    x = _with_non_finite(2, 3, 5, dtype=dtype)
    assert _same(_exact_selection.select_columns(x, start, length), x[..., start : start + length])


def test_the_first_generation_spread_a_dropped_infinity_over_its_row() -> None:
    x = _with_non_finite(2, 3, 5)
    first = _stick_layout.select_columns(x, 0, 3)
    assert torch.isnan(first[0, 0]).all()  # the row whose dropped column held -inf
    assert not torch.isnan(x[0, 0, :3]).any()


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])  # offset slices refused / lowered
@pytest.mark.parametrize(
    ("shape", "target"),
    [((2, 7, 32), [2, 7, 4, 8]), ((2, 7, 96), [2, 7, 3, 4, 8]), ((2, 7, 32), [2, 7, 2, 16])],
    ids=["heads", "fused-qkv", "two-heads"],
)  # fmt: skip
def test_split_heads_is_the_view_for_every_value(
    stack: str, shape: tuple[int, ...], target: list[int]
) -> None:
    x = _with_non_finite(*shape)
    with spyre_sim.use_stack(stack):
        out = _exact_selection.split_heads(x, target)
    assert _same(out, x.view(target))
    assert out.is_contiguous()


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_assign_columns_writes_every_value_into_its_column(dtype: torch.dtype) -> None:
    x = _with_non_finite(3, 8, dtype=dtype)
    value = _with_non_finite(3, 4, dtype=dtype).flip(0)
    expected = x.clone()
    expected[:, 4:] = value
    _exact_selection.assign_columns(x, 4, 4, value)
    assert _same(x, expected)


def test_assign_columns_with_a_number_is_the_stock_write() -> None:
    x = _with_non_finite(3, 8)
    expected = x.clone()
    expected[:, :4] = float("-inf")
    _exact_selection.assign_columns(x, 0, 4, float("-inf"))
    assert _same(x, expected)


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])
def test_the_selections_run_on_the_device_with_no_gap_and_no_fallback(stack: str) -> None:
    x = _with_non_finite(2, 3, 16, dtype=torch.float16)
    with (
        warnings.catch_warnings(),
        spyre_sim.use_stack(stack),
        spyre_sim.configure(numerics=False),  # host numerics: the device holds inf and NaN
    ):
        warnings.simplefilter("ignore")
        on_device = x.to("spyre")
        telemetry.reset()
        with spyre_sim.model_scope():
            out = _exact_selection.select_columns(on_device, 0, 8).cpu()
        snap = telemetry.snapshot()
    assert _same(out, x[..., :8])
    assert not snap.gaps
    assert not snap.fallbacks
    assert not snap.errors
    assert "aten.where.self" in snap.ops


# --- the modes --------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])
@pytest.mark.parametrize("index", range(len(_calls())), ids=[n for n, _ in _calls()])
def test_every_rewritten_call_gives_the_first_generations_result(stack: str, index: int) -> None:
    _, call = _calls()[index]
    features = _stick_layout.FEATURES
    with spyre_sim.use_stack(stack):
        with _stick_layout.StickLayout(features):
            first = call()
        with _stick_layout_exact.ExactStickLayout(features):
            exact = call()
    assert torch.equal(exact, first)


class HalfCut(nn.Module):
    """Scores plus the first half of a bias with -inf in its second half."""

    def forward(self, scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores + bias[..., : scores.shape[-1]], dim=-1)


def _half_cut_inputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 5, 8, generator=generator)
    bias = torch.zeros(2, 3, 5, 16)
    bias[..., 6:] = float("-inf")  # two masked positions inside the cut, every one outside
    return scores.to(device), bias.to(device)


@pytest.mark.parametrize("numerics", [False, True], ids=["functional", "faithful"])
def test_a_minus_inf_bias_cut_on_the_device_matches_the_cpu_with_2_8_0(numerics: bool) -> None:
    with torch.no_grad():
        expected = HalfCut()(*_half_cut_inputs("cpu"))
    results = {}
    with (
        warnings.catch_warnings(),
        spyre_sim.use_stack("2026.09"),
        spyre_sim.configure(numerics=numerics),
        torch.no_grad(),
    ):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        for name, adapter in (("2.7.0", v2_7), ("2.8.0", head_padding)):
            model = HalfCut()
            apply(adapter, model)
            results[name] = model.to("spyre")(*_half_cut_inputs("spyre")).cpu().float()
    torch.testing.assert_close(results["2.8.0"], expected, rtol=1e-2, atol=2e-3)
    if numerics:  # DL16 holds -inf as a finite number: the first generation was right too
        assert torch.equal(results["2.7.0"], results["2.8.0"])
    else:  # host numerics hold -inf: 0 * -inf made every row NaN
        assert torch.isnan(results["2.7.0"]).all()


# --- whole models -----------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["2026.09", "2026.05"])
@pytest.mark.parametrize("family", sorted(_BUILD))
def test_the_device_gives_2_7_0s_results_bit_for_bit(family: str, stack: str) -> None:
    chain.assert_bit_identical(family, stack, (_upto(_V2_7), None), _RENAMES)


def test_greedy_generation_on_the_device_is_2_7_0s() -> None:
    chain.assert_same_greedy_decoding((_upto(_V2_7), None))


@pytest.mark.parametrize("adapter", [head_padding, stick_align_padding], ids=["head", "align"])
def test_same_values_as_stock_on_the_cpu_and_rollback_is_exact(adapter: Any) -> None:
    chain.assert_stock_on_the_cpu_and_exact_rollback(adapter, _stick_layout_exact.CHAIN_KIND)


def test_both_adapters_share_one_mode_and_one_chain() -> None:
    model = _llama()
    apply(head_padding, model)
    apply(stick_align_padding, model)
    kinds = enabled(model)
    assert kinds[_stick_layout_exact.KIND] == {"sub-stick-head", "stick-align"}
    assert not {"stick-layout", "stick-layout-chain-2"} & set(kinds)
    both = [head_padding, stick_align_padding]
    modes = chained_modes(both, _stick_layout_exact.CHAIN_KIND, _stick_layout_exact._chain_factory)
    # the same links in the same order, the two that cut through other indices exact
    assert modes == [f"Exact{m}" if m.startswith("Indexed") else m for m in CHAIN_2_MODES]


def test_the_kinds_sort_where_the_first_generations_did() -> None:
    others = ["sdpa-key-padding", "unfolded-mha"]
    first = sorted([*others, "stick-layout", "stick-layout-chain-2"])
    exact = sorted([*others, _stick_layout_exact.KIND, _stick_layout_exact.CHAIN_KIND])
    assert [k.replace("-exact-chain", "-chain-2").replace("-exact", "") for k in exact] == first


def test_bad_features_and_kinds_are_refused() -> None:
    model = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="unknown stick-layout feature"):
        _stick_layout_exact.enable(model, None, "sticky")
    with pytest.raises(ValueError, match="not chainable"):
        _stick_layout_exact.enable_chain(model, None, ["stick-layout"], "sub-stick-head")


def test_align_2_3_and_head_2_8_0_together_still_match_the_cpu() -> None:
    """A lock may pin the older stick-align-padding beside head-padding 2.8.0: two modes, the
    same results on the CPU."""
    stock, model = _llama(), _llama()
    apply(head_padding, model)
    apply(align_v2_3, model)
    assert torch.equal(prompt_logits(model), prompt_logits(stock))
