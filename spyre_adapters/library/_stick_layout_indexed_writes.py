"""Writes into cuts of the stick dim that come with other indices: ``mask[a:b, a:b] = 0``.

:mod:`spyre_adapters.library._stick_layout` writes ``x[..., a:b] = v`` without cutting the
stick dim when the cut is all the index does, and
:mod:`spyre_adapters.library._stick_layout_indexed` reads ``x[head, a:b]``. A write through such
an index still cut the stick dim: Pixtral (the vision tower of Mistral 3) builds its
block-diagonal attention mask with ``mask[start:end, start:end] = 0`` for each image, and
PatchTSMixer's forecast masking marks the last patches with ``mask[b1:b2, :, -n:] = 1``; each
stopped its model at ``sub-stick-head``.

This mode (kind ``stick-layout-indexed-writes``; kinds are entered in name order, so it sees
each call before ``stick-layout-indexed`` and ``stick-layout``) takes the index apart as the
reading mode does. Basic indexing acts on each dim separately, so ``x[head, a:b] = v`` is
``x[head, :][..., a:b] = v``: ``x[head, :]`` is a view of ``x`` that keeps the whole stick dim,
and the columns are written into it by
:func:`~spyre_adapters.library._stick_layout.assign_columns` (a column mask and one ``where``,
with a 0/1 placement matmul for tensor values): every written element is the value or the old
one, exactly. It applies only where the index's last entry is a slice of ``x``'s last dim, the
other entries are basic, and the release's ``sub-stick-head`` rule would refuse the cut; every
other write is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _bad_pieces, _floating, assign_columns
from spyre_adapters.library._stick_layout_indexed import split_index

__all__ = ["KIND", "IndexedCutWrites"]

KIND = "stick-layout-indexed-writes"


class IndexedCutWrites(TorchFunctionMode):
    """Writes through refused cuts that come with other indices (module docstring)."""

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
        if func is torch.Tensor.__setitem__ and len(args) == 3 and _floating(args[0]):
            x, index, value = args
            parts = split_index(x, index)
            if parts is not None and _bad_pieces(x, [parts[1]], self.features):
                head, (start, length) = parts
                assign_columns(x[(*head, slice(None))], start, length, value)
                return None
        return func(*args, **kwargs)


def _factory(settings: frozenset[Any]) -> IndexedCutWrites:
    return IndexedCutWrites(frozenset(str(s) for s in settings))


register_kind(KIND, _factory)
