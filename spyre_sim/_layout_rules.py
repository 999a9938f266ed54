"""The layout rules of the device (``SpyreLayoutError``; switched off by
``configure(layout_checks=False)``): ``rank-4d``, ``zero-length``, ``stick-align``,
``core-span``, ``sub-stick-head``, ``offset-slice``.

Each is registered with :func:`~spyre_sim._layout_registry.layout_rule`; the exact shapes that
trigger each are listed in :mod:`spyre_sim.layout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from spyre_sim._layout_registry import (
    CORE_COUNT,
    CORE_SPAN_BYTES,
    STICK_BYTES,
    layout_rule,
    stick_elements,
)
from spyre_sim._layout_registry import shape_of as _shape
from spyre_sim._layout_registry import tensors_in as _tensors


def _last_dim(t: torch.Tensor, dim: int) -> bool:
    return t.dim() > 0 and dim % t.dim() == t.dim() - 1


@layout_rule("rank-4d", text="tensors of more than 3 dims are not supported")
def _rank(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    for t in _tensors(args):
        if t.dim() > 3:
            return f"a {t.dim()}-D tensor {_shape(t)}; the device holds tensors of up to 3 dims"
    return None


@layout_rule(
    "rank-4d",
    ops=("aten.view", "aten._unsafe_view", "aten.expand", "aten.reshape", "aten.unsqueeze"),
    uses_args=True,
    text="tensors of more than 3 dims are not supported",
)
def _rank_target(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if len(args) < 2:
        return None
    target = args[1]
    if isinstance(target, int) and isinstance(args[0], torch.Tensor):  # unsqueeze(dim)
        rank = args[0].dim() + 1
    elif isinstance(target, (list, tuple)):
        rank = len(target)
    else:
        return None
    if rank > 3:
        return f"the result would be {rank}-D {list(target) if isinstance(target, (list, tuple)) else ''}; the device holds tensors of up to 3 dims"
    return None


@layout_rule("zero-length", text="zero-length tensor in host->device copy")
def _zero_length(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    for t in _tensors(args):
        if t.numel() == 0 and t.dim() > 0:
            return f"a zero-length tensor {_shape(t)}"
    return None


_MATMULS = ("aten.mm", "aten.addmm")


def _matmul_operands(packet: str, args: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor] | None:
    first = 1 if packet == "aten.addmm" else 0  # addmm(bias, a, b)
    if len(args) < first + 2:
        return None
    a, b = args[first], args[first + 1]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2:
        return a, b
    return None


@layout_rule("stick-align", ops=_MATMULS, text="Unsupported stick expression")
def _stick_align(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    operands = _matmul_operands(packet, args)
    if operands is None:
        return None
    a, b = operands
    if a.dtype.itemsize != 2:
        return None
    k = a.shape[-1]
    stick = stick_elements(a.dtype)
    if k % stick:
        return (
            f"the reduction dim K={k} of a matmul {_shape(a)} @ {_shape(b)} is not a multiple "
            f"of {stick} (one stick); hidden and intermediate sizes must be stick aligned"
        )
    return None


@layout_rule("core-span", ops=_MATMULS, text="per-core span overflow")
def _core_span(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    operands = _matmul_operands(packet, args)
    if operands is None:
        return None
    _, w = operands
    if w.dim() != 2:
        return None
    k, n = w.shape
    stick = stick_elements(w.dtype)
    sticks = -(-n // stick)
    cores = max(d for d in range(1, CORE_COUNT + 1) if sticks % d == 0)
    span = (sticks // cores) * STICK_BYTES * k
    if span > CORE_SPAN_BYTES:
        return (
            f"a weight {_shape(w)} has {sticks} sticks, which divide over at most {cores} of "
            f"{CORE_COUNT} cores: {span / 2**20:.0f} MB per core exceeds the 256 MB span; pad "
            "the dim to a stick count with small prime factors"
        )
    return None


_VIEWS = ("aten.view", "aten._unsafe_view", "aten.reshape")
_SPLITS = ("aten.split", "aten.unsafe_split", "aten.split_with_sizes")


def _pieces(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(offset, length)`` of the pieces a slicing op cuts from the last dim (empty if the op
    does not cut the last dim)."""
    x = args[0]
    last = x.shape[-1]

    def arg(i: int, name: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(name, default)

    if packet in ("aten.slice", "aten.narrow"):
        dim = arg(1, "dim", 0)
        if not _last_dim(x, dim):
            return []
        start = arg(2, "start", None) or 0
        if packet == "aten.narrow":
            length = arg(3, "length", last)
            end = start + length
            step = 1
        else:
            end = arg(3, "end", None)
            end = last if end is None else end
            step = arg(4, "step", 1)
        start = start + last if start < 0 else start
        end = end + last if end < 0 else end
        start, end = max(0, min(start, last)), max(0, min(end, last))
        if step != 1 or end <= start or (start == 0 and end == last):
            return []
        return [(start, end - start)]
    if packet in _SPLITS:
        sizes = arg(1, "split_size", None)
        if sizes is None:
            sizes = kwargs.get("split_sizes")
        dim = arg(2, "dim", 0)
        if not _last_dim(x, dim):
            return []
        if isinstance(sizes, int):
            if sizes <= 0 or sizes >= last:
                return []
            lengths = [min(sizes, last - o) for o in range(0, last, sizes)]
        else:
            lengths = [int(v) for v in sizes]
        out, acc = [], 0
        for n in lengths:
            out.append((acc, n))
            acc += n
        return out
    if packet == "aten.select":
        dim, index = arg(1, "dim", 0), arg(2, "index", 0)
        if not _last_dim(x, dim):
            return []
        return [(index + last if index < 0 else index, 1)]
    if packet == "aten.unbind":
        dim = arg(1, "dim", 0)
        if not _last_dim(x, dim) or last <= 1:
            return []
        return [(i, 1) for i in range(last)]
    return []


@layout_rule(
    "sub-stick-head",
    ops=(*_VIEWS, "aten.slice", "aten.narrow", *_SPLITS),
    uses_args=True,
    text="Could not find a host dimension matching stick expr",
)
def _sub_stick(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if not args or not isinstance(args[0], torch.Tensor) or args[0].dim() == 0:
        return None
    x = args[0]
    stick = stick_elements(x.dtype)
    last = x.shape[-1]
    if packet in _VIEWS:
        target = args[1] if len(args) > 1 else kwargs.get("size")
        if isinstance(target, (list, tuple)) and _splits_stick_dim(x, target, stick):
            return (
                f"a view {_shape(x)} -> {list(target)} splits the stick dim {last} into "
                f"pieces of {target[-1]} < {stick} elements (heads with head_dim < {stick})"
            )
        return None
    if not x.is_floating_point():
        return None  # rotary halves are float activations; index tensors meet offset-slice
    pieces = _pieces(packet, args, kwargs)
    half = last // 2
    halves = [p for p in pieces if p[1] == half]
    if last % 2 == 0 and half < stick and halves and len(pieces) <= 2:
        return (
            f"cutting {_shape(x)} at [{halves[0][0]}:{halves[0][0] + half}] halves the stick dim "
            f"into pieces of {half} < {stick} elements (RoPE on halves needs head_dim / 2 >= "
            f"{stick}; pad heads to {2 * stick})"
        )
    return None


def _inferred(x: torch.Tensor, target: Sequence[int]) -> list[int] | None:
    """``target`` with a ``-1`` resolved as ``view`` resolves it (None if it cannot be)."""
    sizes = [int(v) for v in target]
    if sizes.count(-1) > 1:
        return None
    if -1 in sizes:
        known = 1
        for v in sizes:
            if v != -1:
                known *= v
        if known == 0 or x.numel() % known:
            return None
        sizes[sizes.index(-1)] = x.numel() // known
    return sizes


def _splits_stick_dim(x: torch.Tensor, target: Sequence[int], stick: int) -> bool:
    """``x.view(target)`` keeps the leading dims and splits the last into >= 2 dims whose last
    is shorter than a stick."""
    lead = list(x.shape[:-1])
    sizes = _inferred(x, target)
    if sizes is None or len(sizes) <= x.dim() or sizes[: len(lead)] != lead:
        return False
    tail = sizes[len(lead) :]
    prod = 1
    for v in tail:
        prod *= v
    # a split needs two real pieces: [4] -> [4, 1] only adds a unit dim (an unsqueeze)
    pieces = sum(v > 1 for v in tail)
    return prod == x.shape[-1] and 0 < tail[-1] < stick and tail[-1] < x.shape[-1] and pieces >= 2


@layout_rule(
    "offset-slice",
    ops=("aten.slice", "aten.narrow", *_SPLITS, "aten.select", "aten.unbind"),
    uses_args=True,
    text="non-zero offset assertion in stickify",
)
def _offset_slice(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if not args or not isinstance(args[0], torch.Tensor) or args[0].dim() == 0:
        return None
    x = args[0]
    stick = stick_elements(x.dtype)
    for offset, _ in _pieces(packet, args, kwargs):
        if offset % stick:
            return (
                f"slicing the stick dim of {_shape(x)} at offset {offset}, which is not a "
                f"multiple of {stick} (one stick)"
            )
    return None
