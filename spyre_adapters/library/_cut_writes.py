"""Writes into a cut of the stick dim reach the tensor it was cut from.

:mod:`spyre_adapters.library._stick_layout` computes a cut of the last dim that the device
refuses (``x[..., :d]`` halving a head narrower than two sticks) as a selection matmul: the
values are right, but the result is a new tensor where the stock cut is a *view*. A forward that
writes into the cut -- DeepSeek-style multi-head latent attention assembles its keys with
``k = t.new_empty(...); k[..., :d].copy_(k_nope); k[..., d:].copy_(k_rot)`` -- then wrote into
the copy, and ``k`` kept the uninitialised values of ``new_empty``: a silent wrong answer
(Youtu's tester: NaN in fp16, small random errors in fp32).

This mode (kind ``stick-layout-writes``; kinds are entered in name order, so it runs on top of
``stick-layout`` and sees each call first) lets the cut run as before and, when the result does
not share the source's storage although the stock cut would be a view, remembers where it came
from. An in-place op on such a cut (a method named ``*_``, ``__setitem__`` or an augmented
assignment) runs on the copy as usual and then writes the copy back into its columns of the
source (``source[index] = cut``, which ``stick-layout`` computes without cutting the stick
dim), and so on up when the source is itself such a cut. Reads are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._scoped_modes import register_kind

__all__ = ["KIND", "CutWrites"]

KIND = "stick-layout-writes"
_SOURCE = "_spyre_cut_source"
_CUTS = frozenset({torch.Tensor.__getitem__, torch.Tensor.narrow, torch.narrow})
_AUGMENTED = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"})


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _basic(index: Any) -> bool:
    """``x[index]`` is a view in PyTorch: slices, integers, ``...`` and ``None`` only."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int)) for i in items)


def _in_place(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return name in _AUGMENTED or (name.endswith("_") and not name.startswith("__"))


def _index_of(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The index that selects the cut from its source (``source[index]``)."""
    if func is torch.Tensor.__getitem__:
        return args[1]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    start = args[2] if len(args) > 2 else kwargs.get("start", 0)
    length = args[3] if len(args) > 3 else kwargs.get("length")
    source = args[0]
    dim = dim % source.dim()
    return (*([slice(None)] * dim), slice(start, start + length))


class CutWrites(TorchFunctionMode):
    """Sends in-place writes into rewritten cuts back to their sources (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        target = args[0] if args else None
        if not isinstance(target, torch.Tensor):
            return result
        if func in _CUTS:
            if (
                isinstance(result, torch.Tensor)
                and result.numel()
                and target.numel()
                and not _shares_storage(result, target)
                and (func is not torch.Tensor.__getitem__ or _basic(args[1]))
            ):
                setattr(result, _SOURCE, (target, _index_of(func, args, kwargs)))
            return result
        if _in_place(func):
            cut = target
            while (found := getattr(cut, _SOURCE, None)) is not None:
                source, index = found
                source[index] = cut
                cut = source
        return result


def _factory(settings: frozenset[Any]) -> CutWrites:
    return CutWrites()


register_kind(KIND, _factory)
