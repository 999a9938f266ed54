"""``torch.take_along_dim`` computed as the ``gather`` it stands for: the ``take-along-gather``
adapter (gap ``int64-storage``).

The device stores int64 as int32 and reports it so (gap ``int64-storage``, lasting: it has no
int64). ``torch.take_along_dim`` checks in C++ that its index is int64 before any op is
dispatched, so with a device index it fails whatever the release lowers; ``gather``, which it
decomposes to, takes the int32 index. PP-DocLayoutV2 sorts its detections with
``take_along_dim(boxes, indices[..., None].expand(-1, -1, 4), dim=1)`` (argsort's indices):
every test of its detection model stopped there.

:class:`TakeAlongGather` is a ``TorchFunctionMode`` that, inside the forwards it is bound to,
computes ``torch.take_along_dim`` / ``Tensor.take_along_dim`` as PyTorch's own composite does:
with no ``dim``, ``gather`` of the flattened tensors; with a ``dim``, the tensor and the index
broadcast against each other except along ``dim``, then ``gather`` along it. The values are
the stock ones exactly (the same elements are picked). Every other call runs as it is.

Matched structurally: every module whose forward (its decorator chain included) or class (a
function it defines, outside ``torch``) names ``take_along_dim``; the forward is bound, per
instance, with the shared mode-scoped binding. Nothing the model shows changes: parameters,
buffers, the state dict, the config and every output shape are the stock ones.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward
from spyre_adapters.library.einsum_pieces import _class_mentions

__all__ = ["TakeAlongGather", "TakeAlongGatherAdapter", "adapter", "take_along"]

_NAME = "take_along_dim"
_MARK = "_spyre_take_along_gather"


def _broadcast(a: Sequence[int], b: Sequence[int]) -> list[int] | None:
    """The broadcast of two shapes of one rank, or ``None`` where they do not broadcast."""
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return out


def take_along(values: torch.Tensor, indices: torch.Tensor, dim: int | None) -> torch.Tensor | None:
    """``torch.take_along_dim(values, indices, dim)`` as ``gather`` (module docstring), for
    a ``values`` and ``indices`` of one rank; ``None`` where their shapes do not broadcast (the
    stock function then says so)."""
    if dim is None:
        return values.reshape(-1).gather(0, indices.reshape(-1))
    dim = dim % values.dim() if values.dim() else 0
    wanted = list(values.shape)
    wanted[dim] = indices.shape[dim]
    shape = _broadcast(wanted, indices.shape)
    if shape is None:
        return None
    broadcast_indices = indices.expand(shape)
    shape[dim] = values.shape[dim]
    return values.expand(shape).gather(dim, broadcast_indices)


class TakeAlongGather(TorchFunctionMode):
    """Computes ``take_along_dim`` as ``gather`` (module docstring); every other call runs
    unchanged."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        # by name: the function may be a wrapper of it (spyre_sim wraps take_along_dim to name
        # the gap where the int32 index would be refused)
        if getattr(func, "__name__", None) == _NAME and not kwargs.keys() - {"indices", "dim"}:
            values = args[0] if args else None
            indices = args[1] if len(args) > 1 else kwargs.get("indices")
            dim = args[2] if len(args) > 2 else kwargs.get("dim")
            if (
                isinstance(values, torch.Tensor)
                and isinstance(indices, torch.Tensor)
                and values.dim() == indices.dim()
                and (dim is None or (isinstance(dim, int) and not isinstance(dim, bool)))
            ):
                result = take_along(values, indices, dim)
                if result is not None:
                    return result
        return func(*args, **kwargs)


class TakeAlongGatherAdapter(ModeScopedForward):
    """``take-along-gather`` (see the module docstring)."""

    name = "take-along-gather"
    missing = "no module whose forward or class calls take_along_dim"
    mode = TakeAlongGather
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        def selected(module: nn.Module, fn: types.FunctionType) -> bool:
            return code_mentions(fn, _NAME) or _class_mentions(type(module), _NAME)

        return selected


adapter = TakeAlongGatherAdapter()
