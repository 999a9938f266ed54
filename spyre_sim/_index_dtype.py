"""PyTorch functions that insist on int64 indices, given the int32 the device stores (gap
``int64-storage``).

The device stores an int64 tensor as int32 and reports it as int32 (torch-spyre #2163, the fix
of #2138 and #1714). Most index ops accept int32 (``gather``, ``scatter``, ``index_select``,
advanced indexing) and reach the device's dispatch, where the host kernel gets the widened index
(:mod:`spyre_sim._host_arguments`). A few composite functions check the index dtype in C++
before any op is dispatched, so a device index fails there with PyTorch's own message ("dtype of
indices should be Long but got Int"), which names neither the device nor the gap, and is raised
from whatever Python frame called them. Transformers' beam search (``take_along_dim`` on the beam
indices) and its label one-hot encodings are where real suites meet this.

:func:`install` wraps those functions. A torch function mode that is active (an adapter's)
sees the call first, with the wrapper as the function, as it sees any torch function. The
wrapper itself only acts when the original would refuse: an index that is a ``spyre`` int32
tensor while numerics emulation is on (in functional mode the device keeps int64, and
PyTorch's check passes).

- Inside the model scope (or with ``judge_harness``) the call is refused with a
  :class:`~spyre_sim.errors.SpyreLoweringError` naming gap ``int64-storage`` (lasting: the
  device has no int64), the function and its arguments, so the test that hit it is reported as a
  gap of the stack instead of an unexplained ``RuntimeError``.
- In the harness the call gets host semantics, like every other harness op: the index is given
  as the host holds it (int64) and the function runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
from torch.overrides import handle_torch_function, has_torch_function

from spyre_sim import _lowering, _tensor
from spyre_sim.errors import SpyreLoweringError
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack

__all__ = ["GAP", "install"]

GAP = "int64-storage"


@dataclass(frozen=True)
class _Checked:
    """A function that refuses non-int64 indices: where it lives, its name there, and where its
    index argument is (position and keyword)."""

    owner: Any
    name: str
    label: str  # as shown in the error, e.g. "torch.take_along_dim"
    position: int
    keyword: str


_CHECKED = (
    _Checked(torch, "take_along_dim", "torch.take_along_dim", 1, "indices"),
    _Checked(torch.Tensor, "take_along_dim", "Tensor.take_along_dim", 1, "indices"),
    _Checked(torch.nn.functional, "one_hot", "torch.nn.functional.one_hot", 0, "tensor"),
)


def _device_int32(value: Any) -> TypeGuard[_tensor.SpyreTensor]:
    return type(value) is _tensor.SpyreTensor and value.dtype is torch.int32


def _wrapper(checked: _Checked, original: Callable[..., Any]) -> Callable[..., Any]:
    position, keyword = checked.position, checked.keyword

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        tensors = tuple(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        if has_torch_function(tensors):  # modes first (an adapter's), as for any torch function
            return handle_torch_function(call, tensors, *args, **kwargs)
        in_kwargs = keyword in kwargs
        index = kwargs[keyword] if in_kwargs else args[position] if len(args) > position else None
        if not _device_int32(index) or not settings.numerics:
            return original(*args, **kwargs)
        if _lowering.judged():
            release = current_stack()
            if release.gap_open(GAP):
                _lowering.raise_gap(
                    release,
                    checked.label,
                    GAP,
                    tensors,
                    f"{checked.label} requires an int64 index, and the device stores and "
                    "reports int64 as int32",
                    SpyreLoweringError,
                )
        widened = _tensor.wrap(index._host.to(torch.int64))
        if in_kwargs:
            kwargs = {**kwargs, keyword: widened}
        else:
            args = (*args[:position], widened, *args[position + 1 :])
        return original(*args, **kwargs)

    call._spyre_index_dtype = True  # type: ignore[attr-defined]
    return call


def install() -> None:
    """Wrap the functions that refuse int32 indices (idempotent)."""
    for checked in _CHECKED:
        original = getattr(checked.owner, checked.name)
        if getattr(original, "_spyre_index_dtype", False):
            continue
        setattr(checked.owner, checked.name, _wrapper(checked, original))
