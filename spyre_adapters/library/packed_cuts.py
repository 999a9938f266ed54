"""Cuts along any dim of a buffer that start inside its rows, computed as exact selection
matmuls while the release misreads such views: the ``fused-projection-split`` adapter, 2.3.

Until 2026.09 the device reads a view that starts inside a row of the buffer it was cut from
from the start of that row, when a copy or an attention reads it (``offset-view-input``). 2.2
(:mod:`spyre_adapters.library.packed_picks_v2_2`) computes the cuts of the *last* dim and the
*picks* (one integer index: ``unbind``, ``select``, ``x[i]``) whose stock result starts inside
a row. A *slice* of another dim escaped it: ProphetNet's decoder returns its n-gram streams as
``hidden_states[:, sequence_length:]`` of a ``[b, (1 + ngram) * s, d]`` buffer, a view that
starts ``s * d`` elements into each batch row, and ``lm_head`` copies it to fold the leading
dims (the differential campaign, seed 20261207: missed miscompiles at 2026.05-2026.08, the
n-gram logits computed from the main stream's rows).

2.3 runs the forwards under a mode of kind ``packed-cuts-exact``: 2.2's mode, and also, while
the release misreads such views, every cut of a floating tensor whose stock result starts
inside a row (the device's rule: :func:`spyre_sim.layout.offset_in_row`) is computed as a
selection matmul along the cut dim:

- ``x[index]`` with a basic index (integers, slices of any positive step, ``...``, ``None``):
  each dim the index cuts, in turn;
- ``narrow`` and the pieces of ``split``, ``chunk`` and ``tensor_split`` along any dim;
- the same cuts of an integer or bool tensor (the causal-LM loss's ``labels[..., 1:]``) are
  taken on the host from the whole buffer and sent back: a product would round integers
  beyond DL16's fraction bits.

The result is contiguous, so every view the stock (strided) cut takes, it takes too.

A cut along ``dim`` is ``x.movedim(dim, -1) @ S`` moved back, ``S`` a 0/1 matrix with one 1
per column: every element is one input element times 1 plus exact zeros, with infinities and
NaN kept in place (:func:`spyre_adapters.library._exact_selection.selection_matmul`): the stock
value in every dtype. The result is a new tensor where the stock cut is a view, so it remembers
where it came from: an in-place op on it (a method named ``*_``, ``__setitem__``, an augmented
assignment) runs on it and is then copied into the cut of its source, and so on up through
2.2's picks and 2.3's cuts. Where the release reads such views right, the mode is not entered.
Nothing of the model changes: the state dict keeps its stock keys, every output its shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_exact, packed_picks, packed_picks_v2_2
from spyre_adapters.library._cut_writes import _in_place
from spyre_adapters.library._exact_selection import selection_matmul
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _matrix
from spyre_sim.layout import offset_in_row

__all__ = ["KIND", "PackedCuts", "PackedCutsMode", "adapter", "cut", "cut_index"]

KIND = "packed-cuts-exact"
_CUT = "_spyre_packed_cut_source"  # (source, how to write the cut into it) on a computed cut
_GETITEM = torch.Tensor.__getitem__
_NARROW = frozenset({torch.Tensor.narrow, torch.narrow})
_PIECES = frozenset(
    {
        torch.Tensor.split,
        torch.split,
        torch.Tensor.chunk,
        torch.chunk,
        torch.Tensor.tensor_split,
        torch.tensor_split,
    }
)


def cut(x: torch.Tensor, dim: int, start: int, length: int, step: int = 1) -> torch.Tensor:
    """``x`` cut to ``length`` elements from ``start`` every ``step`` along ``dim``, as an
    exact selection matmul: a new, contiguous tensor, which every view the stock cut takes
    (``.view``, ``.view_as``) takes too; the product along ``dim`` moved back is strided
    otherwise (Wav2Vec2-Conformer's relative shift views ``scores[:, :, 1:]``)."""
    dim %= x.dim()
    pairs = tuple((start + j * step, j) for j in range(length))
    moved = x.movedim(dim, -1)
    picked = selection_matmul(moved, _matrix(x.shape[dim], length, pairs, x))
    return picked.movedim(-1, dim).contiguous()


def _remember(result: torch.Tensor, source: torch.Tensor, view: Callable[..., Any]) -> None:
    """Record that ``result`` is ``view(source)``, computed: a write into it is copied there."""
    setattr(result, _CUT, (source, lambda s, t: view(s).copy_(t)))


def _remember_on_host(result: torch.Tensor, source: torch.Tensor, view: Callable[..., Any]) -> None:
    """As :func:`_remember`, for a cut taken on the host: the write is made on the host copy
    of the whole source, which then replaces the source (the device may refuse the cut)."""

    def write(s: torch.Tensor, t: torch.Tensor) -> None:
        host = s.cpu()
        view(host).copy_(t.cpu())
        s.copy_(host.to(s.device))

    setattr(result, _CUT, (source, write))


_Step = tuple[str, int, int, int, int]  # (what, dim, start, length, step)


def _basic_steps(x: torch.Tensor, index: Any) -> list[_Step] | None:
    """The steps ``x[index]`` takes, dim by dim of the evolving result (``unsqueeze``, a
    ``pick`` of one element, a ``cut``), when ``index`` is a basic index; ``None`` otherwise
    (tensors, lists, booleans: advanced indexing copies, it never views)."""
    items = index if isinstance(index, tuple) else (index,)
    if sum(item is Ellipsis for item in items) > 1:
        return None
    for item in items:
        if isinstance(item, bool) or not (
            item is None or item is Ellipsis or isinstance(item, (int, slice))
        ):
            return None
    consumed = sum(isinstance(item, (int, slice)) for item in items)
    if consumed > x.dim():
        return None
    steps: list[_Step] = []
    shape = list(x.shape)
    dim = 0  # the dim of the evolving result the next item applies to
    for item in items:
        if item is Ellipsis:
            dim += x.dim() - consumed
        elif item is None:
            steps.append(("unsqueeze", dim, 0, 0, 0))
            shape.insert(dim, 1)
            dim += 1
        elif isinstance(item, int):
            size = shape[dim]
            if not -size <= item < size:
                return None
            steps.append(("pick", dim, item % size, 1, 1))
            del shape[dim]
        else:
            start, stop, step = item.indices(shape[dim])
            if step <= 0:
                return None
            length = len(range(start, stop, step))
            if (start, length, step) != (0, shape[dim], 1):
                steps.append(("cut", dim, start, length, step))
                shape[dim] = length
            dim += 1
    return steps


def cut_index(x: torch.Tensor, index: Any) -> torch.Tensor | None:
    """``x[index]`` for a basic index that picks or cuts, every pick and cut an exact
    selection matmul; ``None`` for any other index."""
    steps = _basic_steps(x, index)
    if not steps or all(what == "unsqueeze" for what, *_ in steps):
        return None
    out = x
    for what, dim, start, length, step in steps:
        if what == "unsqueeze":
            out = out.unsqueeze(dim)
        elif what == "pick":
            out = cut(out, dim, start, 1).squeeze(dim)
        else:
            out = cut(out, dim, start, length, step)
    return out


def _inside_row(piece: Any) -> bool:
    return isinstance(piece, torch.Tensor) and piece.numel() > 0 and offset_in_row(piece) != 0


def _dim_of(args: Sequence[Any], kwargs: dict[str, Any], position: int) -> int:
    value = args[position] if len(args) > position else kwargs.get("dim", 0)
    return int(value)


def _write_back(target: torch.Tensor) -> None:
    """Copy an in-place change of a computed cut or pick into its source (and up)."""
    while True:
        picked = getattr(target, packed_picks._SOURCE, None)
        found = getattr(target, _CUT, None)
        if picked is not None:
            source, dim, at = picked
            source.select(dim, at).copy_(target)
        elif found is not None:
            source, write = found
            write(source, target)
        else:
            return
        target = source


class PackedCutsMode(packed_picks_v2_2.ExactPackedPicksMode):
    """2.2's mode, and the cuts along any dim that start inside a row (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor):
            return func(*args, **kwargs)
        if not x.is_floating_point():
            return self._integer_cut(func, args, kwargs)
        if _in_place(func) and (hasattr(x, _CUT) or hasattr(x, packed_picks._SOURCE)):
            result = func(*args, **kwargs)
            _write_back(x)
            return result
        result = super().__torch_function__(func, types, args, kwargs)
        if func is _GETITEM and len(args) == 2 and _inside_row(result):
            index = args[1]
            computed = cut_index(x, index)
            if computed is not None:
                _remember(computed, x, lambda source: source[index])
                return computed
        elif func in _NARROW and _inside_row(result):
            dim = _dim_of(args, kwargs, 1) % x.dim()
            start = int(args[2] if len(args) > 2 else kwargs["start"]) % max(x.shape[dim], 1)
            length = int(args[3] if len(args) > 3 else kwargs["length"])
            computed = cut(x, dim, start, length)
            _remember(computed, x, lambda source: source.narrow(dim, start, length))
            return computed
        elif (
            func in _PIECES
            and isinstance(result, (tuple, list))
            and any(_inside_row(piece) for piece in result)
        ):
            return type(result)(self._pieces(x, result, _dim_of(args, kwargs, 2)))
        return result

    @staticmethod
    def _integer_cut(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """A cut of an integer or bool tensor (``labels[..., 1:]`` of the causal-LM loss) that
        starts inside a row, cut on the host from the whole buffer and sent back: a product
        would round integers above DL16's 2**9 steps. Every other call runs as it is."""
        x = args[0]
        if _in_place(func) and hasattr(x, _CUT):
            result = func(*args, **kwargs)
            _write_back(x)
            return result
        if x.device.type == "cpu" or not (func is _GETITEM or func in _NARROW or func in _PIECES):
            return func(*args, **kwargs)
        if func is _GETITEM and (len(args) != 2 or _basic_steps(x, args[1]) is None):
            return func(*args, **kwargs)  # advanced indexing copies: it never views
        # where the cut starts, read off a meta tensor with x's layout (the device refuses an
        # integer cut inside a stick while offset-slice is open, so it is not taken there first)
        probe = torch.empty(0, dtype=x.dtype, device="meta").as_strided(
            x.size(), x.stride(), x.storage_offset()
        )
        shape = func(probe, *args[1:], **kwargs)
        pieces = shape if isinstance(shape, (tuple, list)) else (shape,)
        if not any(_inside_row(piece) for piece in pieces):
            return func(*args, **kwargs)
        host = func(x.cpu(), *args[1:], **kwargs)
        if not isinstance(host, (tuple, list)):
            moved = host.to(x.device)
            _remember_on_host(moved, x, lambda source: func(source, *args[1:], **kwargs))
            return moved
        out = []
        for k, piece in enumerate(host):
            moved = piece.to(x.device)
            _remember_on_host(moved, x, lambda source, k=k: func(source, *args[1:], **kwargs)[k])
            out.append(moved)
        return type(host)(out)

    @staticmethod
    def _pieces(x: torch.Tensor, pieces: Sequence[torch.Tensor], dim: int) -> list[torch.Tensor]:
        dim %= x.dim()
        out, start = [], 0
        for piece in pieces:
            length = piece.shape[dim]
            if _inside_row(piece):
                computed = cut(x, dim, start, length)
                _remember(computed, x, lambda source, s=start, n=length: source.narrow(dim, s, n))
                out.append(computed)
            else:
                out.append(piece)
            start += length
        return out


def _factory(settings: frozenset[object]) -> contextlib.AbstractContextManager[Any]:
    return PackedCutsMode() if packed_picks._views_misread() else contextlib.nullcontext()


register_kind(KIND, _factory)


class PackedCuts(packed_picks_v2_2.ExactPackedPicks):
    """The ``fused-projection-split`` 2.3 adapter (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout_exact.enable(model, edit, "offset-slice")
        _stick_layout_exact.enable(model, edit, "offset-view-input")
        enable_kind(model, edit, KIND, frozenset())


adapter = PackedCuts()
