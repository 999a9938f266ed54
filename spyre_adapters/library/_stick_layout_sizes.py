"""Shapes given as one-element integer tensors reach the head-split rewrite as integers.

:mod:`spyre_adapters.library._stick_layout` rewrites a view that splits the stick dim into
pieces narrower than a stick (``x.view(b, -1, h, w)`` of a ``[b, c, h * w]`` map) only when it
can read the target shape, which it takes to be Python integers. Multi-scale deformable
decoders keep the size of each feature map in a tensor and pass its elements as they are:
OneFormer's pixel decoder ends with
``z.transpose(1, 2).view(bs, -1, spatial_shapes[i][0], spatial_shapes[i][1])``, so the view
was left to the device, which refuses it (``sub-stick-head``).

PyTorch itself reads such a size with ``__index__`` (one host read of the element, whichever
mode runs the view). This mode (kind ``stick-layout-sizes``; kinds are entered in name order,
so it sees each call before ``stick-layout``) does that read first and passes the shape on
as integers, the values the stock view would use; every call with integer shapes, and every
other call, is passed on unchanged.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._scoped_modes import register_kind

__all__ = ["KIND", "IntegerSizes", "integer_sizes"]

KIND = "stick-layout-sizes"

_SHAPED = frozenset({torch.Tensor.view, torch.Tensor.reshape, torch.reshape})
_UNFLATTEN = frozenset({torch.Tensor.unflatten, torch.unflatten})


def _size_tensor(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.dim() == 0
        and not value.is_floating_point()
        and not value.is_complex()
        and value.dtype is not torch.bool
    )


def _as_ints(sizes: Sequence[Any]) -> tuple[Any, ...] | None:
    """``sizes`` with each one-element integer tensor read as an ``int``; ``None`` when there
    is none (nothing to change)."""
    if not any(_size_tensor(v) for v in sizes):
        return None
    return tuple(operator.index(v) if _size_tensor(v) else v for v in sizes)


def integer_sizes(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The arguments of a view, reshape or unflatten with its shape read as integers, or
    ``None`` when the call is not one of them or its shape holds no integer tensor."""
    if func in _SHAPED and len(args) >= 2 and not kwargs:
        head, rest = args[0], tuple(args[1:])
        if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
            ints = _as_ints(rest[0])
            return None if ints is None else (head, ints)
        ints = _as_ints(rest)
        return None if ints is None else (head, *ints)
    if func in _UNFLATTEN and len(args) == 3 and not kwargs and isinstance(args[2], (list, tuple)):
        ints = _as_ints(args[2])
        return None if ints is None else (args[0], args[1], ints)
    return None


class IntegerSizes(TorchFunctionMode):
    """Reads tensor shape entries of views as integers before the rewrite (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        read = integer_sizes(func, args, kwargs)
        return func(*(args if read is None else read), **kwargs)


def _factory(settings: frozenset[Any]) -> IntegerSizes:
    return IntegerSizes()


register_kind(KIND, _factory)
