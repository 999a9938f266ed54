"""fused-projection-split 2.2: 2.1's cuts at an offset and picks of a packed buffer, with
infinities and NaN kept where the stock op keeps them, the cuts in the mode ``head-padding``
2.8.0 uses. Exact against the stock ops for every value; on finite inputs the device gives the
first generation's results bit for bit; the Hiera case the differential campaign drew matches
the CPU."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
from library_models import apply, assert_rollback_exact
from packaging.version import Version
from test_exact_selection import _same, _with_non_finite
from test_packed_picks import HIERA, _PackedAttention, assert_stock_on_the_cpu
from test_stick_layout_chain import _BUILD, _llama, _upto, assert_bit_identical

import spyre_sim
from spyre_adapters.enablement.differential import Case, Outcome, build_case, run_case
from spyre_adapters.library import _stick_layout_exact
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.packed_picks import PackedPicksMode
from spyre_adapters.library.packed_picks_v2_2 import ExactPackedPicksMode, adapter, pick
from spyre_adapters.library.stick_align_v2_4 import stick_align_padding
from spyre_adapters.library.stick_layout_v2_8_0 import head_padding

#: the first generation: the newest versions before the exact selections
_FIRST = {
    "fused-projection-split": Version("2.1.0"),
    "head-padding": Version("2.7.0"),
    "stick-align-padding": Version("2.3.0"),
}
#: 2.2.0 the newest version of this adapter (2.3.0 is tested against it in its own file)
_SECOND = {"fused-projection-split": Version("2.2.0")}
_RENAMES = {
    "fused-projection-split 2.1.0": "fused-projection-split 2.2.0",
    "head-padding 2.7.0": "head-padding 2.8.0",
    "stick-align-padding 2.3.0": "stick-align-padding 2.4.0",
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_pick_is_select_for_every_value(dtype: torch.dtype) -> None:
    x = _with_non_finite(3, 5, 4, 7, dtype=dtype)
    for dim in range(-4, 4):
        for at in range(-x.shape[dim], x.shape[dim]):
            assert _same(pick(x, dim, at), x.select(dim, at)), (dim, at)


def test_packed_picks_keep_an_infinity_in_its_own_piece() -> None:
    packed = _with_non_finite(2, 5, 3, 64).permute(2, 0, 1, 3)
    with spyre_sim.use_stack("2026.05"):
        with PackedPicksMode():
            first = packed.unbind(0)
        with ExactPackedPicksMode():
            exact = packed.unbind(0)
    stock = packed.unbind(0)
    assert all(_same(e, s) for e, s in zip(exact, stock, strict=True))
    assert any(
        torch.isnan(f).sum() > torch.isnan(s).sum() for f, s in zip(first, stock, strict=True)
    )


@pytest.mark.parametrize("how", ["unbind", "select", "getitem"])
def test_same_results_as_stock_on_the_cpu_and_same_state(how: str) -> None:
    assert_stock_on_the_cpu(adapter, how)


def test_rollback_restores_the_model_exactly() -> None:
    model = _PackedAttention("unbind")
    x = torch.randn(2, 5, 128)
    assert_rollback_exact(adapter, model, lambda m: m(x))


def test_the_three_adapters_share_one_stick_layout_mode() -> None:
    model = _llama()
    for each in (head_padding, stick_align_padding, adapter):
        apply(each, model)
    kinds = enabled(model)
    assert kinds[_stick_layout_exact.KIND] == _stick_layout_exact.FEATURES  # all four
    assert not {"stick-layout", "packed-picks"} & set(kinds)


@pytest.mark.parametrize("stack", ["2026.05", "2026.08"])  # offset cuts refused / misread
@pytest.mark.parametrize("family", sorted(_BUILD))
def test_the_device_gives_the_first_generations_results_bit_for_bit(
    family: str, stack: str
) -> None:
    assert_bit_identical(family, stack, (_upto(_FIRST), _upto(_SECOND)), _RENAMES)


@pytest.mark.parametrize("release", ["2026.05", "2026.08"])
def test_hiera_packed_qkv_matches_on_the_device(spyre: ModuleType, release: str) -> None:
    case = Case.from_json(HIERA)
    run = run_case(case, build_case(case), release, registry=_upto(_SECOND))
    assert run.outcome is Outcome.MATCH, run.detail
    assert "fused-projection-split 2.2.0" in run.adapters
    assert "offset-view-input" not in run.miscompiles
