"""DL16 numerics: the format pinned against hand-computed bit patterns, and where the device
rounds."""

from __future__ import annotations

import math
from types import ModuleType

import pytest
import torch

from spyre_sim import numerics
from spyre_sim.numerics import dl16_decode, dl16_encode, round_to_dl16

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def _bits(*values: float) -> list[int]:
    return [int(b) for b in dl16_encode(torch.tensor(values, dtype=torch.float64)).tolist()]


def test_one_and_sign() -> None:
    # 1.0 = exponent 31 (bias 31), fraction 0: 0 011111 000000000
    assert _bits(1.0, -1.0, 0.0) == [0b0_011111_000000000, 0b1_011111_000000000, 0]


def test_ties_round_away_from_zero() -> None:
    # 1 + 2**-10 lies exactly between 1 and 1 + 2**-9: goes up (fraction 1)
    assert _bits(1 + 2**-10, -(1 + 2**-10)) == [0x3E01, 0xBE01]
    # 1 + 3 * 2**-10 lies between fraction 1 and fraction 2: away from zero -> 2
    assert _bits(1 + 3 * 2**-10) == [0x3E02]
    # just below a tie rounds down
    assert _bits(1 + 2**-10 - 2**-20) == [0x3E00]
    assert numerics.TIE_RULE == "away-from-zero"


def test_smallest_normal_and_no_subnormals() -> None:
    assert _bits(2.0**-30) == [0x0200]
    assert dl16_decode(torch.tensor([0x0200])).item() == 2.0**-30
    # no subnormals: half the smallest normal rounds up to it, less flushes to zero
    assert _bits(2.0**-31, 2.0**-32) == [0x0200, 0x0000]


def test_overflow_saturates_and_inf_has_its_own_pattern() -> None:
    assert _bits(1e10, -1e10) == [0x7FFE, 0xFFFE]
    assert dl16_decode(torch.tensor([0x7FFE])).item() == (2 - 2**-8) * 2**32
    # -inf -> 0xEFFF = -(2 - 2**-9) * 2**24 = -33,521,664 ("about -3.35e7")
    assert _bits(-math.inf, math.inf) == [0xEFFF, 0x6FFF]
    assert dl16_decode(torch.tensor([0xEFFF])).item() == -33_521_664.0


def test_nan_is_the_all_ones_pattern() -> None:
    assert _bits(math.nan) == [0x7FFF]
    assert math.isnan(dl16_decode(torch.tensor([0x7FFF])).item())


def test_fast_rounding_matches_the_reference_on_every_fp16_pattern() -> None:
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    fast = round_to_dl16(every)
    slow = numerics.dl16_host_value(every)
    nan = torch.isnan(every)
    assert torch.isnan(fast[nan]).all()
    assert torch.equal(fast[~nan].view(torch.int16), slow[~nan].view(torch.int16))


def test_common_path_is_exact_on_every_pattern_below_32768(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Magnitudes below 32768 (zero, subnormals, normals up to exponent 29, and the even
    # patterns of exponent 30) never need the saturating path: prove the common path alone
    # gives the reference on all 61,440 of them.
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    below = every[every.abs() < 32768]
    assert below.numel() == 61440

    def refuse(*args: object) -> torch.Tensor:
        raise AssertionError("took the saturating path")

    monkeypatch.setattr(numerics, "_round_saturating_", refuse)
    fast = round_to_dl16(below)
    assert torch.equal(fast.view(torch.int16), numerics.dl16_host_value(below).view(torch.int16))


@pytest.mark.parametrize("value", [32784.0, 65504.0, math.inf, math.nan, -65504.0])
def test_one_large_value_sends_the_tensor_down_the_saturating_path(value: float) -> None:
    # one pattern at exponent 30 with an odd last bit (or inf/NaN) among ordinary values
    values = torch.tensor([1 + 2**-10, 3e-7, value, -2.0], dtype=torch.float16)
    rounded = round_to_dl16(values)
    reference = numerics.dl16_host_value(values)
    nan = torch.isnan(values)
    assert torch.isnan(rounded[nan]).all()
    assert torch.equal(rounded[~nan].view(torch.int16), reference[~nan].view(torch.int16))


def test_host_values_of_out_of_range_dl16() -> None:
    x = torch.tensor([-math.inf, math.inf, 65504.0, -65504.0, 1.0], dtype=torch.float16)
    held = round_to_dl16(x).tolist()
    assert held == [-65472.0, 65472.0, 65472.0, -65472.0, 1.0]


def test_rounding_is_in_place_and_keeps_strides() -> None:
    x = torch.full((4, 6), 1 + 2**-10, dtype=torch.float16).t()
    numerics.round_to_dl16_(x)
    assert x.stride() == (1, 6)
    assert (x == 1 + 2**-9).all()


def test_transfer_rounds_and_numerics_switch(spyre: ModuleType) -> None:
    host = torch.tensor([1 + 2**-10, -math.inf], dtype=torch.float16)
    assert spyre.settings.numerics is True
    assert host.to("spyre").cpu().tolist() == [1 + 2**-9, -65472.0]
    with spyre.configure(numerics=False):
        assert host.to("spyre").cpu().tolist() == [1 + 2**-10, -math.inf]
    assert spyre.telemetry.snapshot().to_json()["gaps"]["no-inf"]["count"] == 2


def test_results_are_rounded_views_are_not(spyre: ModuleType) -> None:
    a = torch.tensor([[1.0, 1.0]], dtype=torch.float16, device="spyre")
    b = a * (1 + 2**-10)  # fp16 result 1 + 2**-10 is stored as DL16
    assert b.cpu().tolist() == [[1 + 2**-9, 1 + 2**-9]]
    with spyre.configure(numerics=False):
        raw = a * (1 + 2**-10)
    view = raw.view(2)  # a view of an unrounded tensor is not rounded again
    assert view.cpu().tolist() == [1 + 2**-10, 1 + 2**-10]


def test_fp32_and_int64_storage(spyre: ModuleType) -> None:
    from spyre_sim.state import device_state

    device_state.forget_warnings()
    with pytest.warns(spyre.SpyreDowncastWarning, match="float32"):
        x = torch.tensor([0.1, 2.0]).to("spyre")
    assert x.dtype == torch.float16
    assert spyre.telemetry.snapshot().to_json()["gaps"]["fp32-storage"]["count"] == 1
    with pytest.warns(spyre.SpyreDowncastWarning, match="int64"):
        i = torch.arange(3).to("spyre")
    assert i.dtype == torch.int32
    with spyre.configure(numerics=False):
        assert torch.tensor([0.1]).to("spyre").dtype == torch.float32


def test_bfloat16_is_native(spyre: ModuleType) -> None:
    x = torch.tensor([1 + 2**-7], dtype=torch.bfloat16)
    y = x.to("spyre") * 1
    assert y.dtype == torch.bfloat16
    assert y.cpu().item() == x.item()


def test_torch_only_rounding_matches_too() -> None:
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    fast = numerics._round_torch_(every.clone())
    slow = numerics.dl16_host_value(every)
    nan = torch.isnan(every)
    assert torch.isnan(fast[nan]).all()
    assert torch.equal(fast[~nan].view(torch.int16), slow[~nan].view(torch.int16))


def test_zero_dim_tensors_round_in_place(spyre: ModuleType) -> None:
    # 1.0009765625 is 1 + 2**-10: a tie between DL16 neighbours 1 and 1 + 2**-9.
    scalar = torch.tensor(1.0009765625, dtype=torch.float16)
    assert numerics.round_to_dl16_(scalar) is scalar
    assert scalar.item() == 1.001953125
    finite_min = torch.tensor(torch.finfo(torch.float16).min, dtype=torch.float16, device="spyre")
    assert finite_min.cpu().item() == -65472.0


def test_nan_enters_turns_nan_into_minus_inf_in_place() -> None:
    from spyre_sim.numerics import nan_enters_

    values = torch.tensor([1.0, float("nan"), -2.0, float("nan")], dtype=torch.float16)
    assert nan_enters_(values) is True
    assert values.tolist() == [1.0, float("-inf"), -2.0, float("-inf")]
    clean = torch.tensor([1.0, float("-inf")], dtype=torch.float16)
    assert nan_enters_(clean) is False
    assert nan_enters_(torch.tensor([1, 2])) is False  # integers hold no NaN


@pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")
def test_nan_entering_the_device_reads_back_as_minus_inf_at_every_release(
    spyre: ModuleType,
) -> None:
    host = torch.tensor([[1.0, float("nan"), float("-inf")] + [0.0] * 61], dtype=torch.float16)
    for release in spyre.builtin_catalogue().names:
        with spyre.use_stack(release):
            back = host.to("spyre").cpu()
        assert back[0, 1].item() == float("-inf"), release  # NaN: -inf (#4700)
        assert back[0, 2].item() == -65472.0, release  # -inf: saturated and held (no-inf)
    copied = torch.zeros(1, 64, dtype=torch.float16).to("spyre")
    copied.copy_(host)
    assert copied.cpu()[0, 1].item() == float("-inf")
    with spyre.use_stack("2026.08"):  # cos falls back: its NaN result enters the device
        assert torch.cos(copied).cpu()[0, 1].item() == float("-inf")
    assert spyre.telemetry.snapshot().to_json()["gaps"]["nan-entry"]["count"] >= 9
    with spyre.configure(numerics=False):
        assert torch.isnan(host.to("spyre").cpu()[0, 1])  # functional mode keeps NaN


@pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")
def test_nan_computed_on_the_device_stays_nan(spyre: ModuleType) -> None:
    zeros = torch.zeros(1, 64, dtype=torch.float16).to("spyre")
    assert torch.isnan((zeros / zeros).cpu()).all()


def test_small_tensors_round_by_the_table_as_large_ones_by_arithmetic() -> None:
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    large = numerics.round_to_dl16_(every.clone())  # one tensor: the arithmetic passes
    small = every.clone()
    for start in range(0, small.numel(), numerics._TABLE_MAX):  # tensors the table rounds
        numerics.round_to_dl16_(small[start : start + numerics._TABLE_MAX])
    assert torch.equal(small.view(torch.int16), large.view(torch.int16))
    reference = numerics.dl16_host_value(every)
    nan = torch.isnan(every)
    assert torch.isnan(small[nan]).all()
    assert torch.equal(small[~nan].view(torch.int16), reference[~nan].view(torch.int16))
    strided = (torch.randn(64, 32) * 1000).half().t()  # a view that is not contiguous
    expected = numerics.round_to_dl16_(strided.contiguous())
    assert torch.equal(numerics.round_to_dl16_(strided).contiguous(), expected)
