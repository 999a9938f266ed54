"""The emulator's own host kernels give the bits of the ATen kernels they stand in for, and
casts on the device store what the device stores."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

from spyre_sim import _host_kernels
from spyre_sim.numerics import round_to_dl16

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

_kernel = _host_kernels.kernel("aten.pow.Tensor_Scalar")
assert _kernel is not None
_pow_scalar = _kernel.call


def _every(dtype: torch.dtype) -> torch.Tensor:
    """All 65,536 bit patterns of a 16-bit float type."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit patterns, except that any NaN equals any NaN (payloads may differ)."""
    nan = torch.isnan(a)
    if not torch.equal(nan, torch.isnan(b)):
        return False
    return torch.equal(a[~nan].view(torch.int16), b[~nan].view(torch.int16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("exponent", [2, 2.0])
def test_square_matches_aten_pow_on_every_pattern(dtype: torch.dtype, exponent: float) -> None:
    x = _every(dtype)
    assert _same_bits(_pow_scalar(x, exponent), torch.ops.aten.pow(x, exponent))


@pytest.mark.parametrize("exponent", [3, 0.5, -1, True])
def test_other_exponents_run_aten_pow(exponent: float) -> None:
    x = _every(torch.float16)
    assert _same_bits(_pow_scalar(x, exponent), torch.ops.aten.pow(x, exponent))


def test_fp32_square_is_left_to_aten() -> None:
    x = torch.randn(1000)
    assert torch.equal(_pow_scalar(x, 2), torch.ops.aten.pow(x, 2))


def test_pow_on_the_device_is_the_rounded_host_square(spyre: ModuleType) -> None:
    host = round_to_dl16(torch.randn(4, 64, dtype=torch.float16) * 40)
    assert torch.equal(host.to("spyre").pow(2).cpu(), round_to_dl16(host.pow(2)))
    assert spyre.telemetry.snapshot().to_json()["ops"]["aten.pow.Tensor_Scalar"]["decomposed"] == 1


def test_cast_to_fp32_on_the_device_keeps_the_dl16_values(spyre: ModuleType) -> None:
    host = round_to_dl16(torch.randn(3, 70, dtype=torch.float16))
    on_device = host.to("spyre").to(torch.float32)
    assert on_device.dtype == torch.float16  # the device stores fp32 as fp16
    assert torch.equal(on_device.cpu(), host)
    assert spyre.telemetry.snapshot().to_json()["ops"]["aten._to_copy.default"]["native"] == 1


def test_casts_to_fp16_on_the_device_are_rounded(spyre: ModuleType) -> None:
    # 1025 is exact in fp16 (odd last bit) and a DL16 tie: it goes away from zero to 1026
    ints = torch.tensor([1025, -1025, 7], dtype=torch.int32).to("spyre")
    assert ints.to(torch.float16).cpu().tolist() == [1026.0, -1026.0, 7.0]
    brain = torch.randn(500, dtype=torch.bfloat16) * 1000
    assert torch.equal(
        brain.to("spyre").to(torch.float16).cpu(), round_to_dl16(brain.to(torch.float16))
    )
    with spyre.configure(numerics=False):
        assert ints.to(torch.float16).cpu().tolist() == [1025.0, -1025.0, 7.0]


def test_fp16_to_bf16_and_int_casts_on_the_device(spyre: ModuleType) -> None:
    host = round_to_dl16(torch.randn(64, dtype=torch.float16) * 100)
    device = host.to("spyre")
    assert torch.equal(device.to(torch.bfloat16).cpu(), host.to(torch.bfloat16))
    as_long = device.to(torch.int64)
    assert as_long.dtype == torch.int32  # int64 is stored as int32
    assert torch.equal(as_long.cpu(), host.to(torch.int32))
