"""Per-instance rebinding of the module-level names a Transformers forward calls.

Transformers attention and model forwards call module-level functions of their modeling module
(``apply_rotary_pos_emb``, ``create_causal_mask``). Assigning a new function to that module
global would change every model of the family in the process, and could not be undone per
model. Instead we clone the forward *function* with a private copy of its globals in which the
names are replaced, and bind the clone to one module instance through the edit.

Decorated forwards (``@deprecate_kwarg``, ``@can_return_tuple``) keep the original function in
a closure cell: the clone walks closure cells recursively and clones every function whose
globals are the modeling module's, so the decorators keep working around the rebound body.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping
from typing import Any

from torch import nn

__all__ = ["code_mentions", "forward_function", "functions_calling", "rebind_globals"]

_MAX_DEPTH = 6


def forward_function(module: nn.Module) -> types.FunctionType | None:
    """The plain function behind ``module.forward`` (instance-bound forwards included)."""
    bound = module.__dict__.get("forward")
    candidate: object = bound if bound is not None else type(module).forward
    if isinstance(candidate, types.MethodType):
        candidate = candidate.__func__
    return candidate if isinstance(candidate, types.FunctionType) else None


def _chain(fn: types.FunctionType, depth: int = 0) -> Iterator[types.FunctionType]:
    yield fn
    if depth >= _MAX_DEPTH:
        return
    for cell in fn.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:  # empty cell
            continue
        if isinstance(content, types.FunctionType):
            yield from _chain(content, depth + 1)


def functions_calling(fn: types.FunctionType, name: str) -> list[types.FunctionType]:
    """The functions in ``fn``'s decorator chain whose code loads the global ``name``."""
    return [f for f in _chain(fn) if name in f.__code__.co_names and name in f.__globals__]


def code_mentions(fn: types.FunctionType, name: str) -> bool:
    """Whether any function of ``fn``'s decorator chain names ``name`` (a global, an attribute
    or a method: ``x.masked_scatter(...)`` and ``torch.gather(...)`` both count)."""
    return any(name in f.__code__.co_names for f in _chain(fn))


def rebind_globals(
    fn: types.FunctionType, owner_globals: dict[str, Any], overrides: Mapping[str, object]
) -> types.FunctionType:
    """A clone of ``fn`` in which every function of its chain that lives in ``owner_globals``
    sees ``overrides`` instead of the module's own values. ``fn`` itself is left untouched."""
    patched = dict(owner_globals)
    patched.update(overrides)
    return _clone(fn, owner_globals, patched, 0)


def _clone(
    fn: types.FunctionType, owner: dict[str, Any], patched: dict[str, Any], depth: int
) -> types.FunctionType:
    cells: list[Any] = []
    changed = fn.__globals__ is owner
    for cell in fn.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:
            cells.append(cell)
            continue
        if isinstance(content, types.FunctionType) and depth < _MAX_DEPTH:
            clone = _clone(content, owner, patched, depth + 1)
            if clone is not content:
                cells.append(types.CellType(clone))
                changed = True
                continue
        cells.append(cell)
    if not changed:
        return fn
    new = types.FunctionType(
        fn.__code__,
        patched if fn.__globals__ is owner else fn.__globals__,
        fn.__name__,
        fn.__defaults__,
        tuple(cells) if fn.__closure__ is not None else None,
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    wrapped = fn.__dict__.get("__wrapped__")
    if isinstance(wrapped, types.FunctionType):
        new.__dict__["__wrapped__"] = _clone(wrapped, owner, patched, depth + 1)
    return new
