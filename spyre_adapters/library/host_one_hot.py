"""``one_hot`` of expert or class indices computed on the host (gap ``int64-storage``).

The device stores and reports int64 as int32, and ``torch.nn.functional.one_hot`` refuses any
index that is not int64 before an op is dispatched. MoE routers build their expert masks with it
(Switch Transformers, NLLB-MoE, DBRX and the many Mixtral-style ``load_balancing_loss_func``
copies), as do some label encodings. The gap is lasting, so this adapter is permanent.

Matched structurally: every module whose class has a method that calls ``one_hot`` (a router's
``route_tokens`` called from its forward counts). Each gets a bound forward that runs the stock
one inside a ``TorchFunctionMode`` scoped to that call, which computes ``one_hot`` on the host
from the index widened to int64 and moves the result back to the index's device; everything
else passes through. Indices are one per token, so the transfers are small.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward

__all__ = ["HostOneHot", "HostOneHotMode", "adapter"]

_NAME = "one_hot"
_MARK = "_spyre_host_one_hot"


class HostOneHotMode(TorchFunctionMode):
    """Computes ``one_hot`` on the host while active; everything else passes through."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        index = args[0] if args else kwargs.get("tensor")
        if getattr(func, "__name__", None) == _NAME and isinstance(index, torch.Tensor):
            host = index.cpu().to(torch.int64)
            rest = {k: v for k, v in kwargs.items() if k != "tensor"}
            return func(host, *args[1:], **rest).to(index.device)
        return func(*args, **kwargs)


def _class_calls(module: nn.Module) -> bool:
    """A method of the module's own class (not of ``nn.Module``) calls ``one_hot``."""
    for klass in type(module).__mro__:
        if klass is nn.Module or klass is object:
            break
        for value in vars(klass).values():
            fn = inspect.unwrap(value) if callable(value) else None
            if isinstance(fn, types.FunctionType) and code_mentions(fn, _NAME):
                return True
    return False


class HostOneHot(ModeScopedForward):
    """The ``host-one-hot`` adapter (see the module docstring)."""

    name = "host-one-hot"
    missing = "no module calls one_hot"
    mode = HostOneHotMode
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        return lambda module, fn: code_mentions(fn, _NAME) or _class_calls(module)


adapter = HostOneHot()
