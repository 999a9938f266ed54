"""Eager attention softmax at the input dtype, without the fp32 upcast (gap ``dtype-cast``).

Transformers' eager attention (``eager_attention_forward``, used by models that force it, such
as Gemma 2, or by ``attn_implementation="eager"``) calls
``softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)``: two casts on the device, which
the stack cannot run before 2026.07. Matched structurally: modules whose forward (decorators
included) refers to ``eager_attention_forward``, in a model configured for eager attention.

Each gets a bound forward that runs the stock one inside a ``TorchFunctionMode`` scoped to that
call, which drops ``dtype=torch.float32`` from ``softmax`` when the scores are fp16 or bf16
(the following ``.to(query.dtype)`` is then a no-op). In fp32 nothing changes at all; in half
precision the softmax is rounded at the input dtype, as on the stacks that need this.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function, functions_calling

__all__ = ["AttentionSoftmax", "InputDtypeSoftmaxMode", "adapter"]

_KERNEL = "eager_attention_forward"
_HALF = (torch.float16, torch.bfloat16)
_MARK = "_spyre_input_dtype_softmax"


class InputDtypeSoftmaxMode(TorchFunctionMode):
    """While active, ``softmax(half, dtype=torch.float32)`` runs at the input dtype."""

    _SOFTMAX = frozenset({nn.functional.softmax, torch.softmax, torch.Tensor.softmax})

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if (
            func in self._SOFTMAX
            and kwargs.get("dtype") is torch.float32
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].dtype in _HALF
        ):
            kwargs["dtype"] = None
        return func(*args, **kwargs)


def _wrapped(stock: types.FunctionType) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with InputDtypeSoftmaxMode():
            return stock(self, *args, **kwargs)

    setattr(forward, _MARK, True)
    return forward


def _targets(model: nn.Module) -> list[tuple[nn.Module, types.FunctionType]]:
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "eager":
        return []
    found: list[tuple[nn.Module, types.FunctionType]] = []
    for module in model.modules():
        bound = module.__dict__.get("forward")
        if getattr(getattr(bound, "__func__", None), _MARK, False):
            continue
        fn = forward_function(module)
        if fn is not None and functions_calling(fn, _KERNEL):
            found.append((module, fn))
    return found


class AttentionSoftmax:
    """The ``attention-softmax-input-dtype`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return bool(_targets(model))

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = _targets(model)
        if not targets:
            raise ValueError(
                f"attention-softmax-input-dtype does not apply to {type(model).__name__}: it "
                f"needs eager attention through {_KERNEL}"
            )
        for module, fn in targets:
            edit.bind_forward(module, _wrapped(fn))


adapter = AttentionSoftmax()
