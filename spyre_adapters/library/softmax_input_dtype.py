"""Softmax at the input dtype, without fp32 round trips around it (gap ``dtype-cast``).

Attention and routing code upcasts half-precision scores for the softmax:
``softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)`` (Transformers' eager attention,
BLOOM), ``query.to(torch.float32)`` (GPT-Neo), ``softmax(router_logits.float())`` (Mixtral-style
MoE routers). Every one of those casts is a device op the stack cannot run before 2026.07.

Matched structurally: modules whose forward (decorators included), or a method of the module it
calls, calls ``softmax``, and
modules that look up ``eager_attention_forward`` in a model configured for eager attention.
Each gets a bound forward that runs the stock one inside a ``TorchFunctionMode`` scoped to that
call, which, for fp16/bf16 tensors only, drops ``dtype=torch.float32`` from ``softmax`` and
turns ``.float()`` / ``.to(torch.float32)`` into no-ops. In fp32 nothing changes at all; in half
precision the scores are rounded at the input dtype, as on the stacks that need this.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._global_rebinding import code_mentions, functions_calling
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward

__all__ = ["InputDtypeSoftmaxMode", "SoftmaxInputDtype", "adapter"]

_KERNEL = "eager_attention_forward"
_HALF = (torch.float16, torch.bfloat16)
_MARK = "_spyre_input_dtype_softmax"


def _is_half(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in _HALF


def _upcast_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` asks for float32 and nothing else."""
    rest = args[1:]
    if kwargs.keys() - {"dtype"}:
        return False
    if len(rest) == 1 and not kwargs:
        return rest[0] is torch.float32
    return not rest and kwargs.get("dtype") is torch.float32


class InputDtypeSoftmaxMode(TorchFunctionMode):
    """While active, half-precision softmax inputs are not upcast to fp32."""

    _SOFTMAX = frozenset({nn.functional.softmax, torch.softmax, torch.Tensor.softmax})

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if args and _is_half(args[0]):
            if func in self._SOFTMAX and kwargs.get("dtype") is torch.float32:
                kwargs["dtype"] = None
            elif (func is torch.Tensor.float and len(args) == 1 and not kwargs) or (
                func is torch.Tensor.to and _upcast_to(args, kwargs)
            ):
                return args[0]
        return func(*args, **kwargs)


def _calls_softmax(module: nn.Module, fn: types.FunctionType) -> bool:
    """``softmax`` in the forward, or in a method of the module the forward calls
    (GPT-Neo's ``self._attn``)."""
    if code_mentions(fn, "softmax"):
        return True
    for name in fn.__code__.co_names:
        method = getattr(type(module), name, None)
        if isinstance(method, types.FunctionType) and code_mentions(method, "softmax"):
            return True
    return False


class SoftmaxInputDtype(ModeScopedForward):
    """The ``softmax-input-dtype`` adapter (see the module docstring)."""

    name = "softmax-input-dtype"
    missing = f"no forward calls softmax and the model does not use {_KERNEL}"
    mode = InputDtypeSoftmaxMode
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        config = getattr(model, "config", None)
        eager = getattr(config, "_attn_implementation", None) == "eager"
        return lambda module, fn: (
            _calls_softmax(module, fn) or (eager and bool(functions_calling(fn, _KERNEL)))
        )


adapter = SoftmaxInputDtype()
