"""The patch mask of masked image modelling prepared on the host (gap ``sub-stick-head``).

Masked-image-modelling heads (ViT, DeiT, Swin, Swin V2, FocalNet ``...ForMaskedImageModeling``)
take a boolean patch mask ``bool_masked_pos`` of shape ``[batch, patches]`` and, for the loss,
reshape it to the patch grid and expand it to pixels::

    bool_masked_pos = bool_masked_pos.reshape(-1, size, size)
    mask = bool_masked_pos.repeat_interleave(p, 1).repeat_interleave(p, 2).unsqueeze(1)

On the device the mask is an integer tensor whose last (stick) dim is the patch count, and the
grid reshape splits it into rows shorter than a stick (225 patches into 15 x 15): the layout rule
of ``sub-stick-head``, which is lasting, so this adapter is permanent. ``head-padding`` rewrites
such splits of floating activations as placement matmuls; a mask is not an activation, and real
deployments build masks on the host.

Matched structurally: every module whose forward (decorators included) has a ``bool_masked_pos``
parameter and calls ``repeat_interleave``. Each gets a bound forward that runs the stock one
inside a ``TorchFunctionMode`` scoped to that call, which follows the mask it was given: an op
whose tensor arguments are all that mask or results derived from it alone (its reshape, its
expansion, its sum) is computed on the host and its results moved back to the mask's device.
Every other op, the float loss that the mask weights included, passes through untouched, and so
does any in-place op (its write must reach the tensor the model holds). The values are the
stock ones exactly: these are integer ops.
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward

__all__ = ["HostPatchMask", "HostPatchMaskMode", "adapter"]

_PARAMETER = "bool_masked_pos"
_EXPANDS = "repeat_interleave"
_MARK = "_spyre_host_patch_mask"


class HostPatchMaskMode(TorchFunctionMode):
    """Computes the ops on ``mask`` and on what was derived from it alone on the host."""

    def __init__(self, mask: torch.Tensor | None = None) -> None:
        super().__init__()
        # by id, holding the tensors weakly: a freed tensor's id may be reused
        self._lineage: weakref.WeakValueDictionary[int, torch.Tensor] = (
            weakref.WeakValueDictionary()
        )
        if mask is not None:
            self._track(mask)

    def _track(self, tensor: torch.Tensor) -> None:
        self._lineage[id(tensor)] = tensor

    def _derived(self, tensor: torch.Tensor) -> bool:
        return self._lineage.get(id(tensor)) is tensor

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        if (
            not tensors
            or _writes(getattr(func, "__name__", ""))
            or not all(self._derived(t) for t in tensors)
            or tensors[0].device.type == "cpu"
        ):
            return func(*args, **kwargs)
        device = tensors[0].device
        host_args, host_kwargs = tree_map(
            lambda a: a.cpu() if isinstance(a, torch.Tensor) else a, (args, kwargs)
        )
        result = func(*host_args, **host_kwargs)

        def back(value: Any) -> Any:
            if not isinstance(value, torch.Tensor):
                return value
            moved = value.to(device)
            self._track(moved)
            return moved

        return tree_map(back, result)


def _writes(name: str) -> bool:
    """Whether the torch function ``name`` writes into its first argument: ``add_``,
    ``__iadd__``, ``__setitem__`` (``__add__`` and ``__getitem__`` do not)."""
    if name.startswith("__") and name.endswith("__"):
        return name == "__setitem__" or name[2:-2] in _AUGMENTED
    return name.endswith("_")


#: The operators whose augmented assignment (``__iadd__``) writes in place.
_AUGMENTED = frozenset(
    f"i{op}"
    for op in (
        "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
        "and", "or", "xor",
    )
)  # fmt: skip


def _has_parameter(fn: types.FunctionType) -> bool:
    try:
        return _PARAMETER in inspect.signature(inspect.unwrap(fn)).parameters
    except (TypeError, ValueError):
        return False


class HostPatchMask(ModeScopedForward):
    """The ``host-patch-mask`` adapter (see the module docstring)."""

    name = "host-patch-mask"
    missing = "no forward takes bool_masked_pos and expands it with repeat_interleave"
    mode = HostPatchMaskMode
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        return lambda module, fn: _has_parameter(fn) and code_mentions(fn, _EXPANDS)

    def scoped(self, stock: types.FunctionType) -> Callable[..., Any]:
        """``stock`` run inside a mode that follows the patch mask of each call."""
        try:
            signature: inspect.Signature | None = inspect.signature(inspect.unwrap(stock))
        except (TypeError, ValueError):
            signature = None

        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            mask = kwargs.get(_PARAMETER)
            if mask is None and signature is not None:
                try:
                    mask = signature.bind_partial(self, *args, **kwargs).arguments.get(_PARAMETER)
                except TypeError:
                    mask = None
            if not isinstance(mask, torch.Tensor) or mask.is_floating_point():
                return stock(self, *args, **kwargs)
            with HostPatchMaskMode(mask):
                return stock(self, *args, **kwargs)

        setattr(forward, self.mark, True)
        return forward


adapter = HostPatchMask()
