"""Torch modes that adapters run a model's forwards under, entered by one pair of global hooks.

Some adapters change how a few torch calls are computed while *any* forward of the model runs
(stick-aligned forms of misaligned shapes, ops bridged to a decomposition or to the host). They
do not bind forwards one by one: :func:`enable` records, through the adapter's ``ModelEdit``, a
marker on every module of the model naming the mode kinds and their settings, and a global
forward pre-hook enters those modes when a marked module's forward starts with none of them
running (the whole model, or a submodule called directly such as
``model.model.layers[0](...)``); the matching forward hook leaves them when that forward ends,
also when it raised. ``restore`` removes the markers with the rest of the edit.

A kind is registered with :func:`register_kind` and a factory that builds the mode (a
``TorchFunctionMode`` or a ``TorchDispatchMode``) from the settings of every adapter that
enabled it on the model. Modes are entered in kind-name order and left in reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

__all__ = ["MARKER", "enable", "enabled", "install_hooks", "register_kind"]

#: The attribute each module of an adapted model carries: kind -> frozenset of settings.
MARKER = "_spyre_scoped_modes"

Factory = Callable[[frozenset[Any]], AbstractContextManager[Any]]
_factories: dict[str, Factory] = {}
_handles: list[RemovableHandle] = []
_owner: list[nn.Module] = []  # the module whose forward entered the running modes
_running: list[list[AbstractContextManager[Any]]] = []


def register_kind(kind: str, factory: Factory) -> None:
    """Make ``kind`` enterable; ``factory(settings)`` builds its mode for one forward."""
    _factories[kind] = factory


def enabled(module: nn.Module) -> Mapping[str, frozenset[Any]]:
    """The kinds and settings enabled on ``module`` (empty when none)."""
    value = module.__dict__.get(MARKER)
    return value if isinstance(value, dict) else {}


def enable(model: nn.Module, edit: Any, kind: str, settings: frozenset[Any]) -> None:
    """Enable ``kind`` with ``settings`` on every module of ``model`` through ``edit`` (a
    ``ModelEdit``: ``restore`` takes it back). Settings of several adapters add up."""
    if kind not in _factories:
        raise ValueError(f"unknown scoped mode kind {kind!r}; known: {sorted(_factories)}")
    install_hooks()
    for path, module in model.named_modules():
        current = dict(enabled(module))
        current[kind] = current.get(kind, frozenset()) | settings
        edit.set_attr(module, MARKER, current, path=path)


def _enter(module: nn.Module, args: Any) -> None:
    if _owner:
        return
    kinds = module.__dict__.get(MARKER)
    if not kinds:
        return
    modes = [_factories[kind](kinds[kind]) for kind in sorted(kinds)]
    entered: list[AbstractContextManager[Any]] = []
    try:
        for mode in modes:
            mode.__enter__()
            entered.append(mode)
    except BaseException:
        for mode in reversed(entered):
            mode.__exit__(None, None, None)
        raise
    _owner.append(module)
    _running.append(entered)


def _leave(module: nn.Module, args: Any, output: Any) -> None:
    if _owner and _owner[-1] is module:
        _owner.pop()
        for mode in reversed(_running.pop()):
            mode.__exit__(None, None, None)


def install_hooks() -> None:
    """Install the global forward hooks that enter and leave the modes (idempotent)."""
    if _handles:
        return
    _handles.append(nn.modules.module.register_module_forward_pre_hook(_enter))
    _handles.append(nn.modules.module.register_module_forward_hook(_leave, always_call=True))
