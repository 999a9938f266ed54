"""Host kernels: ops the emulator runs with its own host code instead of the ATen kernel.

A faster computation that gives the same bits (``pow``), the same computation with its operands
widened (fp16 matrix products and convolutions, below), one that stores the result the way the
device does without a round trip (``_to_copy``), or one that works around a host-only limit
(``resize_``). The results must be those the ATen op plus the device's storage rules give
(tests/sim/test_host_kernels.py and tests/sim/test_device.py check them). Each kernel is
registered for its overload by :func:`host_kernel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spyre_sim import _storage
from spyre_sim.numerics import round_to_dl16_, round_wide_to_dl16
from spyre_sim.settings import settings


@dataclass(frozen=True)
class HostKernel:
    """The emulator's own host code for an overload; ``rounds_itself``: its fp16 results are
    already DL16 (stored by the kernel, or values kept), so they are not rounded again."""

    name: str
    call: Callable[..., Any]
    rounds_itself: bool


_KERNELS: dict[str, HostKernel] = {}

Kernel = Callable[..., Any]


def host_kernel(name: str, *, rounds_itself: bool = False) -> Callable[[Kernel], Kernel]:
    """Register ``call`` as the host kernel of the ATen overload ``name``."""

    def register(call: Kernel) -> Kernel:
        _KERNELS[name] = HostKernel(name, call, rounds_itself)
        return call

    return register


def kernel(name: str) -> HostKernel | None:
    """The host kernel registered for the overload ``name``, or ``None``."""
    return _KERNELS.get(name)


_ATEN_POW = torch.ops.aten.pow.Tensor_Scalar


_ATEN_TO_COPY = torch.ops.aten._to_copy.default


_SQUARE_EXACT = (torch.float16, torch.bfloat16)


@host_kernel("aten.pow.Tensor_Scalar")
def _host_pow_scalar(x: torch.Tensor, exponent: Any) -> torch.Tensor:
    """``pow(x, 2)`` as ``x * x`` for half types: the host's fp16 ``pow`` kernel is ~15x
    slower than ``mul``, and both compute the square exactly in fp32 (11 + 11 significant
    bits fit in 24) and round it once to the same type, so the bits are the same."""
    if exponent == 2 and type(exponent) is not bool and x.dtype in _SQUARE_EXACT:
        return torch.mul(x, x)
    return _ATEN_POW(x, exponent)  # type: ignore[no-any-return]


@host_kernel("aten._to_copy.default", rounds_itself=True)
def _host_to_copy(x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """``_to_copy`` that stores its result the way the device does, without a round trip:
    a DL16 (fp16) tensor cast to a type the device stores as fp16 (fp32, fp64) is stored as
    the same DL16 values, so the cast and the DL16 rounding are skipped; other casts to fp16
    (int32, bf16) are rounded here, since :func:`_store_one` does not round this op."""
    if settings.numerics and x.dtype is torch.float16:
        target = kwargs.get("dtype")
        if target is not None and _storage.STORE_AS.get(target) is torch.float16:
            _storage.storage_dtype(target)  # the once-per-process downcast warning
            kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
        return _ATEN_TO_COPY(x, **kwargs)  # type: ignore[no-any-return]
    if settings.numerics and kwargs.get("dtype") is torch.float16 and not x.is_complex():
        # int32, bf16 -> fp16: through fp32 (exact for both), rounded once to DL16
        wide = _ATEN_TO_COPY(x, **dict(kwargs, dtype=torch.float32))
        return round_wide_to_dl16(wide, owned=True)
    out: torch.Tensor = _ATEN_TO_COPY(x, **kwargs)
    if settings.numerics and out.dtype is torch.float16:
        round_to_dl16_(out)
    return out


_ATEN_RESIZE = torch.ops.aten.resize_.default


@host_kernel("aten.resize_.default", rounds_itself=True)
def _host_resize_(
    x: torch.Tensor, size: Sequence[int], memory_format: torch.memory_format | None = None
) -> torch.Tensor:
    """``resize_`` for a host whose storage NumPy has seen (DL16 rounding runs on a NumPy view,
    and PyTorch then marks the storage as not resizable): a new host holding what ``resize_``
    would keep, the leading elements of the storage from the tensor's offset. The caller makes
    the device tensor adopt it (see :func:`spyre_sim._op_results._store_one`)."""
    storage = x.untyped_storage()
    if storage.resizable():
        return _ATEN_RESIZE(x, size, memory_format=memory_format)  # type: ignore[no-any-return]
    fresh = torch.empty(size, dtype=x.dtype, memory_format=memory_format or torch.contiguous_format)
    available = storage.nbytes() // x.element_size() - x.storage_offset()
    kept = min(fresh.numel(), available)
    if kept > 0:
        flat = x.new_empty(0).set_(storage, x.storage_offset(), (available,), (1,))
        fresh.view(-1)[:kept].copy_(flat[:kept])
    return fresh


#: Overloads whose fp16 form the host computes from fp32 operands (see :func:`_widened`).
WIDENED = (
    "aten.mm.default",
    "aten.bmm.default",
    "aten.addmm.default",
    "aten.baddbmm.default",
    "aten.addbmm.default",
    "aten.mv.default",
    "aten.addmv.default",
    "aten.dot.default",
    "aten.convolution.default",
)


def _half_only(values: Sequence[Any]) -> bool:
    """Some tensor of ``values`` is fp16 and no tensor of them is another floating type (a
    mixed call keeps ATen's own error)."""
    seen = False
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            if value.dtype is not torch.float16:
                return False
            seen = True
    return seen


def _wide(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype is torch.float16:
        return value.float()
    return value


def _widened(name: str) -> Kernel:
    """The ATen kernel of ``name``, fed fp32 copies of fp16 operands and rounded back to fp16.
    The host's fp16 kernels of these ops accumulate in fp32 too and round once, but without
    fp16 arithmetic units they are 10-70x slower than the fp32 ones (a 256x256x256 ``mm``: 26 ms
    against 0.9 ms). The sums run in another order, so a result may sit one fp16 ulp from the
    fp16 kernel's (about 0.2% of the elements of a K=512 product, 0.1% after DL16 rounding;
    none at K=32; ``addbmm``'s fp16 kernel rounds after each batch, so there the widened result
    is the closer to the exact one): the device's own accumulation order is neither."""
    packet, _, overload = name.removeprefix("aten.").partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload)

    def call(*args: Any, **kwargs: Any) -> Any:
        if not _half_only([*args, *kwargs.values()]):
            return op(*args, **kwargs)
        out = op(*[_wide(a) for a in args], **{k: _wide(v) for k, v in kwargs.items()})
        return out.to(torch.float16)

    return call


for _name in WIDENED:
    host_kernel(_name)(_widened(_name))
