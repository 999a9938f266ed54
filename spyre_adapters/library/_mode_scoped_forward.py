"""Forwards run inside a ``TorchFunctionMode`` scoped to the call.

Some gaps are closed by changing how a few torch functions behave while one module's forward
runs (compute ``gather`` on the host, keep ``softmax`` at the input dtype), and only then.
:class:`ModeScopedForward` is such an adapter: every module whose forward function (see
``forward_function``) its ``selects`` predicate accepts gets a bound forward that runs the
stock one inside a fresh ``mode()``. The bound forward carries the ``mark`` attribute, so a
module already adapted is not a target a second time. Nothing global is patched.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, ClassVar

from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions, forward_function
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["ForwardSelector", "ModeScopedForward"]

ForwardSelector = Callable[[nn.Module, types.FunctionType], bool]
"""Whether a module, with its forward function, is a target."""


class ModeScopedForward(TargetedAdapter[tuple[nn.Module, types.FunctionType]]):
    """An adapter binding mode-scoped forwards (see the module docstring).

    Subclasses set ``name``, ``missing`` (see :class:`TargetedAdapter`), ``mode`` (the
    ``TorchFunctionMode`` class), ``mark`` (the attribute set on bound forwards) and either
    ``calls`` (target the forwards whose code mentions that name) or their own ``selects``.
    """

    mode: ClassVar[type[TorchFunctionMode]]
    mark: ClassVar[str]
    calls: ClassVar[str | None] = None

    def selects(self, model: nn.Module) -> ForwardSelector:
        """The target predicate for the modules of ``model``: by default, forwards whose
        code mentions ``calls``."""
        name = self.calls
        if name is None:
            raise NotImplementedError(f"{type(self).__name__} sets neither calls nor selects")
        return lambda module, fn: code_mentions(fn, name)

    def targets(self, model: nn.Module) -> list[tuple[nn.Module, types.FunctionType]]:
        selects = self.selects(model)
        found: list[tuple[nn.Module, types.FunctionType]] = []
        for module in model.modules():
            bound = module.__dict__.get("forward")
            if getattr(getattr(bound, "__func__", None), self.mark, False):
                continue
            fn = forward_function(module)
            if fn is not None and selects(module, fn):
                found.append((module, fn))
        return found

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, types.FunctionType]],
    ) -> None:
        for module, fn in targets:
            edit.bind_forward(module, self.scoped(fn))

    def scoped(self, stock: types.FunctionType) -> Callable[..., Any]:
        """``stock`` run inside a fresh ``mode()``, marked as ours."""
        mode = self.mode

        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            with mode():
                return stock(self, *args, **kwargs)

        setattr(forward, self.mark, True)
        return forward
