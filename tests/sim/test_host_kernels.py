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


def test_pow_on_the_device_is_the_square_rounded_once(spyre: ModuleType) -> None:
    host = round_to_dl16(torch.randn(4, 64, dtype=torch.float16) * 40)
    assert torch.equal(host.to("spyre").pow(2).cpu(), spyre.round_wide_to_dl16(host.double() ** 2))
    assert spyre.telemetry.snapshot().to_json()["ops"]["aten.pow.Tensor_Scalar"]["decomposed"] == 1


def test_cast_to_fp32_on_the_device_keeps_the_dl16_values(spyre: ModuleType) -> None:
    host = round_to_dl16(torch.randn(3, 70, dtype=torch.float16))
    on_device = host.to("spyre").to(torch.float32)
    assert on_device.dtype == torch.float16  # the device stores fp32 as fp16
    assert torch.equal(on_device.cpu(), host)
    assert spyre.telemetry.snapshot().to_json()["ops"]["aten._to_copy.default"]["native"] == 1


def test_a_cast_to_fp32_reads_back_as_fp32_outside_the_model_only(spyre: ModuleType) -> None:
    # the harness's out.float().cpu() idiom sees float32; inside a model a transfer gives what
    # the device holds (fp16 for every float32 tensor), so a host fallback of two operands that
    # are float32 in the model gets one dtype (GLM-4V: a float32 table cast from the weights,
    # sampled at coordinates computed from float32 sizes, stopped at "expected scalar type
    # Float but found Half")
    host = round_to_dl16(torch.randn(1, 2, 4, 4, dtype=torch.float16))
    seen: list[tuple[torch.dtype, torch.dtype]] = []

    class Fallback(torch.nn.Module):
        def forward(self, table: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            wide = table.to(torch.float32)
            coords = scale * 2  # float32 in the model; no cast: stored and read as fp16
            seen.append((wide.cpu().dtype, coords.cpu().dtype))
            return wide

    table, scale = host.to("spyre"), torch.ones(3, dtype=torch.float16).to("spyre")
    with torch.no_grad():
        out = Fallback()(table, scale)
    assert seen == [(torch.float16, torch.float16)]
    assert out.dtype == torch.float16  # the device stores float32 as fp16
    assert out.cpu().dtype == torch.float32  # read by the harness as the dtype cast to
    assert torch.equal(out.cpu(), host.float())


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


def _ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many fp16 steps separate ``a`` and ``b`` elementwise (same signs assumed)."""
    return (a.view(torch.int16).int() - b.view(torch.int16).int()).abs()


_WIDENED_CALLS = {
    "aten.mm.default": lambda: (torch.randn(37, 512), torch.randn(512, 65)),
    "aten.bmm.default": lambda: (torch.randn(3, 17, 256), torch.randn(3, 256, 64)),
    "aten.addmm.default": lambda: (torch.randn(65), torch.randn(9, 300), torch.randn(300, 65)),
    "aten.baddbmm.default": lambda: (
        torch.randn(2, 5, 7),
        torch.randn(2, 5, 130),
        torch.randn(2, 130, 7),
    ),
    "aten.addbmm.default": lambda: (
        torch.randn(5, 7),
        torch.randn(3, 5, 200),
        torch.randn(3, 200, 7),
    ),
    "aten.mv.default": lambda: (torch.randn(33, 700), torch.randn(700)),
    "aten.addmv.default": lambda: (torch.randn(33), torch.randn(33, 700), torch.randn(700)),
    "aten.dot.default": lambda: (torch.randn(1000), torch.randn(1000)),
    "aten.convolution.default": lambda: (
        torch.randn(2, 8, 20, 20),
        torch.randn(16, 8, 3, 3),
        torch.randn(16),
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        1,
    ),
}


@pytest.mark.parametrize("name", _host_kernels.WIDENED)
def test_widened_fp16_kernels_round_the_exact_result(name: str) -> None:
    """The fp16 result from fp32 operands: the fp16 kernel's shape, dtype and strides, and
    every element within one fp16 step of the exact (fp64) result rounded to fp16, and no
    farther from it than the fp16 kernel's own result is, plus one step."""
    torch.manual_seed(0)
    args = [a.half() if isinstance(a, torch.Tensor) else a for a in _WIDENED_CALLS[name]()]
    kernel = _host_kernels.kernel(name)
    assert kernel is not None
    assert not kernel.rounds_itself
    packet, _, overload = name.removeprefix("aten.").partition(".")
    aten = getattr(getattr(torch.ops.aten, packet), overload)
    got, fp16_kernel = kernel.call(*args), aten(*args)
    exact = aten(*[a.double() if isinstance(a, torch.Tensor) else a for a in args])
    assert got.dtype is torch.float16
    assert got.shape == fp16_kernel.shape
    assert got.stride() == fp16_kernel.stride()
    rounded = exact.half()
    same_sign = torch.sign(got) == torch.sign(rounded)
    assert (_ulps_apart(got, rounded)[same_sign] <= 1).all()
    assert ((got.double() - exact).abs()[~same_sign] <= 1e-3).all()
    error, kernel_error = (got.double() - exact).abs(), (fp16_kernel.double() - exact).abs()
    step = torch.finfo(torch.float16).eps * exact.abs().clamp_min(1.0)
    assert (error <= kernel_error + step).all()


def test_widened_kernels_leave_other_dtypes_and_mixed_calls_to_aten() -> None:
    kernel = _host_kernels.kernel("aten.mm.default")
    assert kernel is not None
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert torch.equal(kernel.call(a, b), torch.mm(a, b))
    assert torch.equal(
        kernel.call(a.bfloat16(), b.bfloat16()), torch.mm(a.bfloat16(), b.bfloat16())
    )
    with pytest.raises(RuntimeError) as widened:
        kernel.call(a.half(), b)
    with pytest.raises(RuntimeError) as native:
        torch.mm(a.half(), b)
    assert str(widened.value) == str(native.value)


def test_an_fp16_product_on_the_device_is_the_exact_product_rounded_once(
    spyre: ModuleType,
) -> None:
    torch.manual_seed(0)
    a = round_to_dl16(torch.randn(13, 64, dtype=torch.float16))
    b = round_to_dl16(torch.randn(64, 37, dtype=torch.float16))
    got = (a.to("spyre") @ b.to("spyre")).cpu()
    assert got.dtype is torch.float16
    assert torch.equal(got, spyre.round_wide_to_dl16(a.double() @ b.double()))
    assert (_ulps_apart(got, round_to_dl16(a @ b)) <= 2).all()
