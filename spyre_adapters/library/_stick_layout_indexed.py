"""Cuts of the stick dim that come with other indices: ``boxes[:, None, :2]``.

:mod:`spyre_adapters.library._stick_layout` rewrites a cut of the last dim when it is the only
thing the index does (``x[..., :2]``, ``x[:, :, 2:]``). Detection heads index their boxes
(a last dim of 4: centre and size) with the cut and other entries at once: RT-DETR's
deformable attention takes ``reference_points[:, :, None, :, None, :2]`` and ``[..., 2:]``,
YOLOS's Hungarian matcher ``boxes[:, None, :2]``. Each halves a stick dim of 4 into pieces of
2 (``sub-stick-head``), and the floating rewrite did not recognise it.

This mode (kind ``stick-layout-indexed``) takes such an index apart. Basic indexing (slices,
integers, ``None``, ``...``) acts on each dim separately, so ``x[head, cut]`` is
``select_columns(x, cut)[head, :]``: the cut as the same 0/1 selection matmul the floating
rewrite uses (every result element one input element times 1 plus exact zeros), then the rest
of the index, which no longer cuts the stick dim. It applies only where the index's last entry
is a slice of ``x``'s last dim and the release's ``sub-stick-head`` rule would refuse the cut
(:func:`~spyre_adapters.library._stick_layout._bad_pieces`); every other index is left alone.

Like the floating rewrite, the result is a new tensor where the stock one is a view: a write
into it does not reach ``x``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _bad_pieces, _floating, select_columns

__all__ = ["KIND", "IndexedCuts", "split_index"]

KIND = "stick-layout-indexed"


def split_index(x: torch.Tensor, index: Any) -> tuple[tuple[Any, ...], tuple[int, int]] | None:
    """``(head, (start, length))`` when ``x[index]`` is basic indexing whose last entry is a
    step-1 partial slice of ``x``'s last dim and whose other entries do more than keep every
    position (else ``None``: the floating rewrite's own case, or no cut)."""
    if not isinstance(index, tuple) or len(index) < 2 or x.dim() == 0:
        return None
    *head, last = index
    if not isinstance(last, slice):
        return None
    consuming = 1
    for entry in head:
        if entry is None or entry is Ellipsis:
            continue
        if isinstance(entry, slice) or (isinstance(entry, int) and not isinstance(entry, bool)):
            consuming += 1
            continue
        return None  # tensors, booleans, lists: advanced indexing is not taken apart
    if Ellipsis not in head and consuming != x.dim():
        return None  # the last entry is not the last dim
    if all(e is Ellipsis or e == slice(None) for e in head):
        return None  # x[..., a:b] and x[:, :, a:b]: the floating rewrite's case
    start, stop, step = last.indices(x.shape[-1])
    if step != 1 or stop <= start or (start == 0 and stop == x.shape[-1]):
        return None
    return tuple(head), (start, stop - start)


class IndexedCuts(TorchFunctionMode):
    """Takes refused cuts that come with other indices apart (module docstring)."""

    def __init__(self, features: frozenset[str]) -> None:
        super().__init__()
        self.features = features

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and len(args) == 2 and _floating(args[0]):
            x, index = args
            parts = split_index(x, index)
            if parts is not None and _bad_pieces(x, [parts[1]], self.features):
                head, cut = parts
                return select_columns(x, *cut)[(*head, slice(None))]
        return func(*args, **kwargs)


def _factory(settings: frozenset[Any]) -> IndexedCuts:
    return IndexedCuts(frozenset(str(s) for s in settings))


register_kind(KIND, _factory)
