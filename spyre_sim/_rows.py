"""Where a view starts in the rows of the buffer it was cut from (the device's addressing).

The device addresses a tensor by rows of its buffer. A view whose first element lies inside a
row (packed Q|K|V: K and V start ``h*d`` and ``2*h*d`` elements into each row of the
projection's output) is what the ``offset-view-input`` miscompile reads from the row start.
The rule is public so that adapters can recognise the same views the device misreads.
"""

from __future__ import annotations

import torch

__all__ = ["offset_in_row", "row_pitch"]


def row_pitch(x: torch.Tensor) -> int:
    """The row length of the buffer a view was cut from, read off its strides: the stride of
    the first dim (in stride order) outside the view's innermost dense block; a size-1 dim
    counts with its stride (``h[:, -1:, :]`` of ``[b, s, e]``: pitch ``e``); broadcast
    (stride-0) dims are skipped."""
    block = 1
    for stride, size in sorted(zip(x.stride(), x.shape, strict=True)):
        if stride == 0:
            continue  # a broadcast (expanded) dim repeats, it does not step through memory
        if size == 1:
            if stride >= block:  # one row taken of a buffer with rows of this pitch
                return int(stride)
            continue
        if stride != block:
            return int(stride)
        block *= int(size)
    return block


def offset_in_row(x: torch.Tensor) -> int:
    """How many elements into a row of its buffer ``x`` starts (0: at a row start, also for an
    empty or 0-dim tensor)."""
    if x.numel() == 0 or x.dim() == 0:
        return 0
    offset = x.storage_offset()
    if offset == 0:
        return 0
    pitch = row_pitch(x)
    return int(offset % pitch) if pitch > 0 else 0
