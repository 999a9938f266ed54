"""DL16 numbers beyond fp16's range keep their values (:mod:`spyre_sim._wide_values`).

The fp16 host tensors hold such a number as +-65472; before, every value computed from it was
the emulator's, not the device's, and the test was classed ``emulator``. Now the result keeps
its DL16 values in float32 beside the host tensor, and only where the emulator cannot follow
the device (a read in fp16, a host fallback, a write into a tensor without them) is the limit
``fp16-range`` counted.
"""

from __future__ import annotations

import copy
import math
from types import ModuleType

import pytest
import torch

from spyre_sim.numerics import (
    DL16_HOST_MAX,
    DL16_MAX,
    dl16_decode,
    dl16_encode,
    round_wide_in_range,
    round_wide_kept,
)

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

STACK = "2026.09"


def _limits(run: object) -> dict[str, object]:
    return run.snapshot.to_json()["emulator_limits"]  # type: ignore[attr-defined,no-any-return]


def _squares(spyre: ModuleType) -> torch.Tensor:
    """A device tensor of 2 x 64 DL16 values 89984 (300 squared): beyond fp16's range."""
    x = torch.full((2, 64), 300.0, dtype=torch.float16).to("spyre")
    with spyre.use_stack(STACK), torch.no_grad():
        return x * x


def test_rounding_keeps_dl16s_range() -> None:
    """Beyond 65472 the DL16 values themselves, by the exact encoder; finite values beyond
    DL16's largest saturate to it; infinities are held as +-65472 as in the host tensors; a
    value that rounds down to 65472 needs nothing kept."""
    torch.manual_seed(0)
    values = torch.exp(torch.empty(4096).uniform_(math.log(7e4), math.log(8e9))).float()
    values[::2] *= -1
    held, kept = round_wide_kept(values)
    assert kept is not None
    assert kept.dtype is torch.float32
    expected = dl16_decode(dl16_encode(values.double()))
    assert torch.equal(kept.double(), expected)
    assert bool((held.float().abs() == DL16_HOST_MAX).all())
    edges = torch.tensor([1e12, -1e12, float("inf"), float("-inf"), float("nan"), 1.0])
    rounded = round_wide_in_range(edges)
    assert rounded[:4].tolist() == [DL16_MAX, -DL16_MAX, DL16_HOST_MAX, -DL16_HOST_MAX]
    assert math.isnan(rounded[4].item())
    assert rounded[5].item() == 1.0
    assert round_wide_kept(torch.tensor([65490.0, 1.0]))[1] is None  # rounds to 65472


def test_what_is_computed_from_a_wide_value_is_the_devices(spyre: ModuleType) -> None:
    """An RMS norm over hidden values of 9e3 (CPMAnt): the squares' mean, 8.1e7, is a DL16
    number; its reciprocal square root is an ordinary one again. The normalised values match
    the CPU (before: 9000 * rsqrt(65472) = 35 instead of 1), with no limit counted."""
    hidden = torch.full((2, 64), 9000.0)
    hidden[1] = 5000.0
    expected = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True))
    device = hidden.to("spyre")
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        variance = device.pow(2).mean(-1, keepdim=True)
        normed = (device * torch.rsqrt(variance)).cpu()
    assert torch.allclose(normed.float(), expected, rtol=2e-3)
    assert _limits(run) == {}


def test_comparisons_and_casts_see_the_wide_values(spyre: ModuleType) -> None:
    squares = _squares(spyre)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        assert bool((squares > 70000.0).all().cpu())
        widened = squares.float()
        assert widened.cpu().unique().tolist() == [89984.0]  # read in float32: the DL16 value
        assert (squares / 4).cpu().unique().tolist() == [22496.0]
    assert _limits(run) == {}


def test_reads_in_fp16_count_the_limit(spyre: ModuleType) -> None:
    squares = _squares(spyre)
    for read in (lambda t: t.cpu(), lambda t: t[0, 0].item(), lambda t: t.tolist()):
        with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
            read(squares)
        assert _limits(run)["fp16-range"]["count"] == 1  # type: ignore[index]
    assert squares.cpu().unique().tolist() == [DL16_HOST_MAX]


def test_views_share_the_wide_values_and_writes_through_them(spyre: ModuleType) -> None:
    squares = _squares(spyre)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        row = squares[0]
        row.mul_(0.5)  # written through the view: 44992
        quarters = (squares / 4).cpu()
    assert quarters[0].unique().tolist() == [11248.0]
    assert quarters[1].unique().tolist() == [22496.0]
    assert _limits(run) == {}


def test_copies_keep_or_count(spyre: ModuleType) -> None:
    """A deep copy keeps the wide values; a copy into a tensor without them counts the limit
    when it holds a number beyond fp16's range; a host tensor copied in replaces them."""
    squares = _squares(spyre)
    twin = copy.deepcopy(squares)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        assert (twin / 4).cpu().unique().tolist() == [22496.0]
        small = torch.zeros(2, 64, dtype=torch.float16).to("spyre")
        small.copy_(squares / 100)
    assert small.cpu().unique().tolist() == [900.0]
    assert _limits(run) == {}
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as lost:
        small.copy_(squares)
    assert _limits(lost)["fp16-range"]["count"] == 1  # type: ignore[index]
    with spyre.use_stack(STACK), torch.no_grad():
        twin.copy_(torch.ones(2, 64))
        assert (twin / 4).cpu().unique().tolist() == [0.25]


def test_a_host_fallback_counts_the_limit(spyre: ModuleType) -> None:
    """At 2026.09 ``cumsum`` falls back to the CPU: the device hands it fp16, which cannot hold
    89984, and the limit is counted on the test that hit it."""
    squares = _squares(spyre)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        torch.cumsum(squares, -1)
    snapshot = run.snapshot.to_json()
    assert "aten.cumsum.default" in snapshot["fallbacks"]
    assert snapshot["emulator_limits"]["fp16-range"]["count"] == 1


def test_a_bit_view_drops_the_wide_values_for_every_view(spyre: ModuleType) -> None:
    squares = _squares(spyre)
    row = squares[1]
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        squares.view(torch.int16)
        held = (row / 4).cpu()
    assert held.unique().tolist() == [16368.0]  # 65472 / 4: the held values from here on
    assert _limits(run)["fp16-range"]["count"] == 1  # type: ignore[index]


def test_an_in_place_view_drops_the_wide_values_and_counts_the_loss(spyre: ModuleType) -> None:
    """``unsqueeze_`` changes what the tensor is, not its values: it runs on the held values,
    and the tensor it changed carries no wide values after it."""
    squares = _squares(spyre)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        squares.unsqueeze_(0)
    assert squares.shape == (1, 2, 64)
    assert squares._wide is None or not squares._wide.store.valid
    assert _limits(run)["fp16-range"]["count"] == 1  # type: ignore[index]


def test_an_in_place_op_with_a_miscompile_rule_that_does_not_fire_keeps_them(
    spyre: ModuleType,
) -> None:
    """``add_`` has the ``eps-underflow`` reproduction at 2026.09 (and ``fp32-reduce-rows``'
    tag at 2025.12); adding 100 to 89984 is not their pattern, so the target keeps its DL16
    value. Before, any in-place op with a reproduction ran on the held 65472."""
    for stack in (STACK, "2025.12"):
        squares = _squares(spyre)
        with spyre.use_stack(stack), torch.no_grad(), spyre.telemetry.record() as run:
            squares.add_(100.0)  # 90084, rounded to DL16 (steps of 128 here): 90112
            quarter = squares / 4
        assert quarter.float().cpu().unique().tolist() == [22528.0], stack  # read at 2026.09
        assert _limits(run) == {}, stack


def test_an_in_place_reproduction_that_changes_the_result_replaces_them(
    spyre: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-place op whose reproduction changes what wide mode wrote: the target holds the
    reproduction's values, its wide values are dropped, and the limit is counted (no rule of
    the catalogue does this today: a stand-in rule on ``mul_`` for a miscompiled gap)."""
    from spyre_sim import _miscompile_registry as registry

    def halves(args: object, kwargs: object, out: torch.Tensor) -> torch.Tensor:
        return out / 2

    stand_in = registry.Miscompile("eps-underflow", "aten.mul_", halves)
    monkeypatch.setitem(registry._BY_PACKET, "aten.mul_", [stand_in])
    squares = _squares(spyre)
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        row = squares[0]
        squares.mul_(1.0)
        quarter = (squares / 4).float().cpu()
        from_view = row.float().cpu()
    assert quarter.unique().tolist() == [DL16_HOST_MAX / 8]
    assert from_view.unique().tolist() == [DL16_HOST_MAX / 2]
    assert _limits(run)["fp16-range"]["count"] == 1  # type: ignore[index]


def test_an_op_with_a_miscompile_rule_that_does_not_fire_keeps_them(spyre: ModuleType) -> None:
    """``add`` has the ``eps-underflow`` reproduction at 2026.09; ``x + x`` is not its pattern,
    so the sum of two 40000s (80000, beyond fp16) keeps its DL16 value."""
    x = torch.full((2, 64), 40000.0, dtype=torch.float16).to("spyre")
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        doubled = x + x
        quarter = (doubled / 4).cpu()
    assert quarter.unique().tolist() == [20000.0]
    assert _limits(run) == {}
