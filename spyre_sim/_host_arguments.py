"""An op's arguments as the host kernel takes them: device tensors unwrapped to their host
tensors.

Unwrapping is by hand (no pytree) for the shapes ATen uses: tensors, lists of tensors,
scalars, the ``spyre`` device. A non-scalar CPU tensor is a device-mismatch error (as on a
real device), except as an index; while unwrapping, the dtypes and shapes can be collected into
a signature (the verdict cache key); scalars beyond fp16's range are saturated for ops on fp16
storage; int32 index tensors are widened to the int64 host kernels insist on; and
:func:`host_tensors` lists the tensors of unwrapped arguments or results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from spyre_sim._tensor import SpyreTensor
from spyre_sim.settings import settings

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

_HOST = torch.device("cpu")


def widened(hargs: list[Any], positions: tuple[int, ...]) -> list[Any]:
    """``hargs`` with int32 tensors at ``positions`` (or in lists there) widened to int64."""
    for i in positions:
        if i >= len(hargs):
            continue
        value = hargs[i]
        if isinstance(value, torch.Tensor):
            if value.dtype is torch.int32:
                hargs[i] = value.to(torch.int64)
        elif isinstance(value, (list, tuple)):
            hargs[i] = type(value)(
                v.to(torch.int64) if isinstance(v, torch.Tensor) and v.dtype is torch.int32 else v
                for v in value
            )
    return hargs


_MISMATCH = (
    "Expected all tensors to be on the same device, but found at least two devices, "
    "spyre:0 and cpu!"
)


_CPU_INDEX_OK = frozenset(
    {"aten.index", "aten.index_put_", "aten.index_put", "aten._index_put_impl_"}
)


def _unwrap_list(items: Any, info: OpInfo, sig: list[Any] | None) -> Any:
    out = []
    for x in items:
        if type(x) is SpyreTensor:
            h = x._host
            if sig is not None:
                sig.append(h.dtype)
                sig.append(h.shape)
            out.append(h)
        elif isinstance(x, torch.Tensor) and x.dim() > 0 and info.packet not in _CPU_INDEX_OK:
            raise RuntimeError(f"{_MISMATCH} (in {info.name})")
        else:
            out.append(x)
    return out if isinstance(items, list) else tuple(out)


_HALF_MAX = float(torch.finfo(torch.float16).max)


def unwrap(args: Sequence[Any], info: OpInfo, sig: list[Any] | None) -> list[Any]:
    """``args`` with device tensors replaced by their host tensors (dtypes and shapes appended
    to ``sig`` when it is given)."""
    out: list[Any] = []
    big = False
    for x in args:
        if type(x) is SpyreTensor:
            h = x._host
            if sig is not None:
                sig.append(h.dtype)
                sig.append(h.shape)
            out.append(h)
        elif isinstance(x, torch.Tensor):
            if x.dim() > 0 and info.packet not in _CPU_INDEX_OK:
                raise RuntimeError(f"{_MISMATCH} (in {info.name})")
            out.append(x)
        elif isinstance(x, (list, tuple)) and x and isinstance(x[0], torch.Tensor | None):
            out.append(_unwrap_list(x, info, sig))
        elif isinstance(x, torch.device) and x.type == "spyre":
            out.append(_HOST)
        else:
            if type(x) is float and not -_HALF_MAX <= x <= _HALF_MAX and x - x == 0.0:
                big = True  # finite, beyond fp16's range
            out.append(x)
    return _saturated(out) if big and settings.numerics else out


def _saturated(hargs: list[Any]) -> list[Any]:
    """Scalars beyond fp16's range, for an op on fp16 storage, saturated to its largest finite
    value. The device's DL16 saturates too (no infinity), at a wider range (about 8.6e9) than
    the fp16 host tensors that hold DL16 values here, so a ``fill_(-1e9)`` (beam search's
    running scores) stores -65504 instead of failing the host kernel: a documented limit of
    the emulation."""
    if not any(isinstance(h, torch.Tensor) and h.dtype is torch.float16 for h in hargs):
        return hargs
    return [
        max(-_HALF_MAX, min(_HALF_MAX, h)) if type(h) is float and h - h == 0.0 else h
        for h in hargs
    ]


def unwrap_kwargs(
    kwargs: dict[str, Any] | None, info: OpInfo, sig: list[Any] | None
) -> dict[str, Any]:
    """:func:`unwrap` for keyword arguments."""
    if not kwargs:
        return {}
    keys = list(kwargs)
    values = unwrap([kwargs[k] for k in keys], info, sig)
    return dict(zip(keys, values, strict=True))


def host_tensors(hargs: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among ``hargs``, and inside the lists and tuples among them."""
    out: list[torch.Tensor] = []
    for a in hargs:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(b for b in a if isinstance(b, torch.Tensor))
    return out
