"""Selections the device decides between values closer than its resolution.

A top-k or an argmax picks by order. On the device the values it orders are DL16 numbers,
9 fraction bits: two values within one DL16 step of each other (the step at their magnitude,
``2**(e - 9)`` for ``2**e <= |x| < 2**(e+1)``) are in an order that rounding decided, and the
CPU, holding them in float32, may order them the other way. An MoE router is the common case:
256 experts' sigmoid scores near 0.56 are about 0.001 apart, one DL16 step, so the k-th and
(k+1)-th expert of a token are often within a step and the device routes that token to another
expert than the CPU does. The output then differs by more than rounding, without any error.

That is the device's precision, not a miscompile: the emulator computes it as the device
would. It is counted (``telemetry.count_rounding_ties``, per op and module: how many rows were
so decided) so that a difference it causes is reported as precision, with the op and the
module that decided, instead of being a silent wrong answer.

A check is registered per ATen op name with :func:`watch` and reads the host operands of the
call (the DL16 values the device holds): it returns how many rows of the selection were
within one step. :func:`watcher` gives the check of an op, or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from spyre_sim.numerics import dl16_step

__all__ = [
    "Watch",
    "registered",
    "selection_ties",
    "tied_rows",
    "topk_arguments",
    "watch",
    "watcher",
]

#: check(host args, host kwargs) -> rows of the selection decided within one DL16 step
Watch = Callable[[Sequence[Any], dict[str, Any]], int]

_WATCHED: dict[str, Watch] = {}


def watch(*ops: str) -> Callable[[Watch], Watch]:
    """Register the decorated check for the ATen ops named (``"aten.topk.default"``)."""

    def add(fn: Watch) -> Watch:
        for op in ops:
            _WATCHED[op] = fn
        return fn

    return add


def watcher(op: str) -> Watch | None:
    """The check registered for ``op``, or ``None``."""
    return _WATCHED.get(op)


def registered() -> tuple[str, ...]:
    """The ops that have a check, sorted."""
    return tuple(sorted(_WATCHED))


def tied_rows(values: torch.Tensor, k: int, dim: int, largest: bool = True) -> torch.Tensor | None:
    """Per row of ``values`` along ``dim`` (the shape without ``dim``), whether its ``k``-th and
    ``(k+1)``-th best are within one DL16 step of each other: the rows whose choice of the top
    ``k`` rounding decided. ``None`` when ``values`` is not floating point or a row holds ``k``
    values or fewer (nothing is left out)."""
    if not values.is_floating_point() or values.dim() == 0 or k <= 0:
        return None
    dim = dim % values.dim()
    if values.shape[dim] <= k or values.numel() == 0:
        return None
    best = values.float().topk(k + 1, dim=dim, largest=largest, sorted=True).values
    kth, next_ = best.select(dim, k - 1), best.select(dim, k)
    finite = torch.isfinite(kth) & torch.isfinite(next_)
    step = dl16_step(torch.maximum(kth.abs(), next_.abs()))
    return ((kth - next_).abs() <= step) & finite


def selection_ties(values: torch.Tensor, k: int, dim: int, largest: bool = True) -> int:
    """How many rows :func:`tied_rows` finds (0 when it finds none or cannot judge)."""
    rows = tied_rows(values, k, dim, largest)
    return 0 if rows is None else int(rows.sum())


def topk_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, int, bool]:
    """``k``, ``dim`` and ``largest`` of an ``aten.topk.default`` call."""
    k = int(_argument(args, kwargs, 1, "k", 0))
    dim = int(_argument(args, kwargs, 2, "dim", -1))
    return k, dim, bool(_argument(args, kwargs, 3, "largest", True))


def _argument(
    args: Sequence[Any], kwargs: dict[str, Any], index: int, name: str, default: Any
) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


@watch("aten.topk.default")
def _topk(args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    return selection_ties(args[0], *topk_arguments(args, kwargs))


def _best_one(largest: bool) -> Watch:
    def check(args: Sequence[Any], kwargs: dict[str, Any]) -> int:
        values = args[0]
        dim = _argument(args, kwargs, 1, "dim", None)
        if not isinstance(values, torch.Tensor):
            return 0
        if dim is None:  # argmax over every element
            return selection_ties(values.reshape(-1), 1, 0, largest)
        return selection_ties(values, 1, int(dim), largest)

    return check


watch("aten.argmax.default", "aten.max.dim")(_best_one(largest=True))
watch("aten.argmin.default", "aten.min.dim")(_best_one(largest=False))
