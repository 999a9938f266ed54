"""Which ``nn.Module`` forward is running, for error messages and telemetry.

Two global module hooks (installed once by :func:`install`) push and pop module objects on a
plain list; nothing else happens per module call. The dotted path of the innermost module,
relative to the outermost one on the stack, is computed only when asked (an error, a gap hit)
and cached per (outermost, innermost) pair.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from spyre_sim.state import device_state

_stack: list[torch.nn.Module] = device_state.module_stack  # the device state's list
_PathCache = dict[int, tuple["weakref.ref[torch.nn.Module]", str | None]]
_paths: weakref.WeakKeyDictionary[torch.nn.Module, _PathCache] = weakref.WeakKeyDictionary()
_handles: list[RemovableHandle] = []


def _push(module: torch.nn.Module, args: Any) -> None:
    _stack.append(module)


def _pop(module: torch.nn.Module, args: Any, output: Any) -> None:
    # always_call=True: runs even when forward raised, so the stack never leaks frames.
    if _stack and _stack[-1] is module:
        _stack.pop()
    elif module in _stack:  # a hook of another library skipped our pop: unwind to it
        del _stack[len(_stack) - 1 - _stack[::-1].index(module) :]


def install() -> None:
    """Install the global forward hooks (idempotent)."""
    if _handles:
        return
    _handles.append(torch.nn.modules.module.register_module_forward_pre_hook(_push))
    _handles.append(torch.nn.modules.module.register_module_forward_hook(_pop, always_call=True))


def current_module_path() -> str | None:
    """Dotted path of the running module inside the outermost running module.

    ``None`` outside any forward; the outermost module's own class name when the op ran in
    its own forward (e.g. ``"LlamaForCausalLM"``); otherwise e.g. ``"model.layers.0.mlp"``.
    A module running inside the model that is not one of its submodules -- a function that
    the ``kernels`` library turned into a module instance (Transformers 5.25's
    ``apply_rotary_pos_emb``, class ``Func``) -- counts as the innermost submodule that called
    it (``"model.layers.0.self_attn"``).
    """
    if not _stack:
        return None
    outer = _stack[0]
    for inner in reversed(_stack):
        if inner is outer:
            break
        path = _path_in(outer, inner)
        if path is not None:
            return path
    return type(outer).__name__


def _path_in(outer: torch.nn.Module, inner: torch.nn.Module) -> str | None:
    """``inner``'s dotted path among ``outer``'s submodules (``None``: not one of them)."""
    cache = _paths.get(outer)
    if cache is None:
        cache = _paths[outer] = {}
    hit = cache.get(id(inner))
    if hit is not None and hit[0]() is inner:
        return hit[1]
    path: str | None = None
    for name, sub in outer.named_modules(remove_duplicate=False):
        if sub is inner:
            path = name
            break
    cache[id(inner)] = (weakref.ref(inner), path)
    return path


def outermost() -> torch.nn.Module | None:
    """The outermost module whose forward is running (the model), or ``None``."""
    return _stack[0] if _stack else None


def reset() -> None:
    """Forget the running-module stack (after an interrupted forward in tests)."""
    _stack.clear()
