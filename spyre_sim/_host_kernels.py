"""Host kernels: ops the emulator runs with its own host code instead of the ATen kernel.

A faster computation that gives the same bits (``pow``), one that stores the result the way
the device does without a round trip (``_to_copy``), or one that works around a host-only limit
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
from spyre_sim.numerics import round_to_dl16_
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
