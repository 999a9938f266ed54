"""PyTorch's multi-head attention function run op by op where the other adapters see it: the
``unfolded-mha`` adapter.

``torch.nn.functional.multi_head_attention_forward`` (which ``nn.MultiheadAttention`` and,
for one, WavLM's attention call) is Python code that first hands the whole call to the active
torch-function modes and then, with every mode set aside, computes it from ``linear``,
``bmm``/``baddbmm``, ``softmax`` and ``scaled_dot_product_attention``. The adapters that make
those ops lowerable (``stick-align-padding``'s padded matmuls, ``head-padding``, the SDPA
forms) work through such modes, so the ops inside that function never reach them: a WavLM of
hidden size 16 stops at its first projection (``mm [182, 16] @ [16, 16]``, gap
``stick-align``), although the same projection in any other attention runs.

The model's forwards run under a ``TorchFunctionMode`` of the scoped-mode kind
``unfolded-mha`` (:mod:`spyre_adapters.library._scoped_modes`). Its name sorts after every
other kind, so it is entered last and is the first to see a call; it runs
``multi_head_attention_forward``'s own code (the same function object's code, with
``has_torch_function`` answering no for that one hand-over), so every op it issues passes
through the other adapters' modes. Nothing else changes: the same code computes the same
values, the weights and the outputs keep their shapes. Matched structurally: a model with a
module whose class calls ``multi_head_attention_forward`` in any of its methods.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions, rebind_globals
from spyre_adapters.library._scoped_modes import enable, enabled, register_kind

__all__ = ["KIND", "UnfoldedMha", "UnfoldedMhaMode", "adapter", "calls_mha"]

KIND = "unfolded-mha"
_NAME = "multi_head_attention_forward"
_STOCK = nn.functional.multi_head_attention_forward


def _no_override(*args: Any, **kwargs: Any) -> bool:
    return False


#: ``multi_head_attention_forward``'s own code, without its hand-over to the modes.
_UNFOLDED: Callable[..., Any] = rebind_globals(
    _STOCK,  # type: ignore[arg-type]
    vars(nn.functional),
    {"has_torch_function": _no_override},
)


class UnfoldedMhaMode(TorchFunctionMode):
    """While active, ``multi_head_attention_forward`` runs op by op through the modes below."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is _STOCK:
            return _UNFOLDED(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _factory(settings: frozenset[object]) -> UnfoldedMhaMode:
    return UnfoldedMhaMode()


register_kind(KIND, _factory)


def calls_mha(module: nn.Module) -> bool:
    """Whether a method of ``module``'s class (its own or inherited, ``torch.nn``'s
    ``MultiheadAttention`` included, decorated ones through their decorator chain) names
    ``multi_head_attention_forward``."""
    for cls in type(module).__mro__:
        if cls in (nn.Module, object):
            continue
        for value in vars(cls).values():
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType) and code_mentions(fn, _NAME):
                return True
    return False


class UnfoldedMha:
    """The ``unfolded-mha`` adapter, version 1.0 (see the module docstring)."""

    name = "unfolded-mha"

    def matches(self, model: nn.Module) -> bool:
        if KIND in enabled(model):
            return False  # already adapted
        return any(calls_mha(module) for module in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        if not self.matches(model):
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: no module calls "
                f"torch.nn.functional.{_NAME}"
            )
        enable(model, edit, KIND, frozenset())


adapter = UnfoldedMha()
