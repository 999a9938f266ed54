"""Picks of a packed buffer that start inside its rows, computed as one-hot matmuls (gap
``offset-view-input``): the ``fused-projection-split`` adapter, 2.1.

Until 2026.09 the device reads a view that starts inside a row of the buffer it was cut from
from the start of that row, when a copy or an attention reads it (``offset-view-input``).
2.0 (:mod:`spyre_adapters.library.offset_slices`) computes every cut of the *last* dim at a
non-zero offset as a selection matmul while the release does, and the pick ``x[..., i, :]``
of a packed ``[..., 3, d]`` view. A packed projection picked along another dim escaped it:
Hiera's ``qkv.reshape(b, -1, nw, 3, h, d).permute(3, 0, 4, 2, 1, 5).unbind(0)`` gives keys and
values that start ``h*d`` and ``2*h*d`` elements into each row of the ``qkv`` buffer, and the
copy the score matmul makes of the key read the query's values (the differential campaign:
missed miscompiles at 2026.05-2026.08).

2.1 runs the forwards under a mode of kind ``packed-picks`` as well. While the release
misreads such views, a pick of a floating tensor -- ``unbind``, ``select``, or ``x[index]``
with one integer and otherwise full slices -- whose stock result starts inside a row (the
device's rule: :func:`spyre_sim.layout.offset_in_row`) is computed as
``x.movedim(dim, -1) @ e_i``, a one-hot column zero-padded to a whole stick: each element is
one input element times 1 plus exact zeros, the stock value in every dtype (a NaN or an
infinity elsewhere along the picked dim reaches the result, as with the other selection
matmuls). The result is a new tensor where the stock pick is a view, so it remembers where it
came from: an in-place op on it (a method named ``*_``, ``__setitem__``, an augmented
assignment) runs on it as usual and is then copied into the picked slice of the source, and so
on up when the source is itself such a pick. Where the release reads such views right, the
mode is not entered at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import spyre_sim
from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._cut_writes import _in_place
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _matrix, padded_matmul
from spyre_adapters.library.offset_slices import OffsetSlices
from spyre_sim.layout import offset_in_row

__all__ = ["KIND", "PackedPicks", "PackedPicksMode", "adapter", "pick"]

KIND = "packed-picks"
_UNBIND = frozenset({torch.Tensor.unbind, torch.unbind})
_SELECT = frozenset({torch.Tensor.select, torch.select})
_GETITEM = torch.Tensor.__getitem__
_SOURCE = "_spyre_pick_source"  # (source, dim, index) on a computed pick


def pick(x: torch.Tensor, dim: int, at: int) -> torch.Tensor:
    """``x.select(dim, at)`` as a one-hot matmul along ``dim`` (a new, contiguous tensor that
    remembers its source, so that the mode writes in-place changes back)."""
    size = x.shape[dim]
    column = _matrix(size, 1, ((at % size, 0),), x)  # kept on the device per shape and dtype
    picked = padded_matmul(x.movedim(dim, -1), column).squeeze(-1)
    setattr(picked, _SOURCE, (x, dim, at))
    return picked


def _write_back(target: torch.Tensor) -> None:
    """Copy an in-place change of a computed pick into its slice of the source (and up)."""
    while (found := getattr(target, _SOURCE, None)) is not None:
        source, dim, at = found
        source.select(dim, at).copy_(target)
        target = source


def _inside_row(piece: Any) -> bool:
    return isinstance(piece, torch.Tensor) and offset_in_row(piece) != 0


def _one_int(x: torch.Tensor, index: Any) -> tuple[int, int] | None:
    """``(dim, i)`` when ``x[index]`` picks one integer ``i`` along ``dim`` and keeps every
    other dim whole (full slices and at most one ``...``); ``None`` otherwise."""
    items = index if isinstance(index, tuple) else (index,)
    ints = [k for k, item in enumerate(items) if isinstance(item, int)]
    if len(ints) != 1 or isinstance(items[ints[0]], bool):
        return None
    if sum(item is Ellipsis for item in items) > 1:
        return None
    for item in items:
        if item is Ellipsis or isinstance(item, int):
            continue
        if not (isinstance(item, slice) and item == slice(None)):
            return None
    position = ints[0]
    dim = x.dim() - (len(items) - position) if Ellipsis in items[:position] else position
    if not 0 <= dim < x.dim():
        return None
    return dim, int(items[position])


class PackedPicksMode(TorchFunctionMode):
    """Computes the picks that start inside a row as one-hot matmuls (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            return result
        if hasattr(x, _SOURCE) and _in_place(func):
            _write_back(x)
            return result
        if func in _UNBIND:
            if isinstance(result, tuple) and any(_inside_row(p) for p in result):
                dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
                return tuple(pick(x, dim, i) for i in range(len(result)))
        elif func in _SELECT:
            if _inside_row(result):
                dim = args[1] if len(args) > 1 else kwargs["dim"]
                at = args[2] if len(args) > 2 else kwargs["index"]
                return pick(x, dim, at)
        elif func is _GETITEM and len(args) == 2 and _inside_row(result):
            found = _one_int(x, args[1])
            if found is not None:
                return pick(x, *found)
        return result


def _views_misread() -> bool:
    state = spyre_sim.current_stack().gap_state("offset-view-input")
    return state is spyre_sim.GapState.MISCOMPILED


def _factory(settings: frozenset[object]) -> contextlib.AbstractContextManager[Any]:
    return PackedPicksMode() if _views_misread() else contextlib.nullcontext()


register_kind(KIND, _factory)


class PackedPicks(OffsetSlices):
    """The ``fused-projection-split`` 2.1 adapter: 2.0's cuts and the packed picks."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, KIND, frozenset())


adapter = PackedPicks()
