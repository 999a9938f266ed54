"""The adapter contract: what an adapter implementation is, and the transaction it edits through.

An adapter never mutates a model directly. It receives a :class:`ModelEdit` and expresses every
change through it (replace a submodule, set an attribute, bind a forward). The edit records the
old value of everything it touches, so the framework can

- roll a failed application back exactly (atomicity: the model is left as it was), and
- undo an applied adapter later (``spyre_adapters.restore``), in reverse order.

A minimal third-party adapter::

    import torch
    from spyre_adapters.contract import ModelEdit

    class ExpGelu:
        \"\"\"Swap ``nn.GELU(approximate="tanh")`` for an equivalent pow-free form.\"\"\"

        def matches(self, model: torch.nn.Module) -> bool:
            return any(isinstance(m, torch.nn.GELU) for m in model.modules())

        def apply(self, model: torch.nn.Module, edit: ModelEdit) -> None:
            for path, module in model.named_modules():
                if isinstance(module, torch.nn.GELU):
                    edit.replace_module(path, MyPowFreeGelu())

    adapter = ExpGelu()   # manifest: entry_point = "my_pkg.adapters:adapter"

The manifest (TOML) carries name, version, kind and the gaps; the implementation only says
whether it matches a model and how to change it.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

__all__ = ["Adapter", "ModelEdit"]

_MISSING = object()
_STORES = ("_parameters", "_buffers", "_modules")


@runtime_checkable
class Adapter(Protocol):
    """An adapter implementation (the object a manifest's ``entry_point`` names).

    ``matches`` must not change the model. ``apply`` must change it only through ``edit``;
    it may raise, and then every change made so far is rolled back by the caller.

    Optionally, a class may also offer ``apply_together(adapters, model, edit)`` (a class or
    static method): ``prepare`` then applies a run of consecutive adapters of that class with
    one call, which must change the model exactly as applying each in turn would. It is
    offered only where ``matches`` does not depend on what the others of the run change (the
    run's ``matches`` are asked before any of them is applied); the op bridges offer it. When
    it raises, ``prepare`` rolls the run back and applies its adapters one by one, so that a
    failure names the adapter that failed.
    """

    def matches(self, model: nn.Module) -> bool: ...

    def apply(self, model: nn.Module, edit: ModelEdit) -> None: ...


@dataclass(slots=True)
class _Change:
    owner: object
    name: str
    old: Any  # _MISSING when the attribute did not exist
    kind: str  # "module" | "attr"


@dataclass
class ModelEdit:
    """A reversible set of changes to one model (see the module docstring).

    ``touched`` lists the dotted module paths changed, in order, without repeats.
    """

    model: nn.Module
    _changes: list[_Change] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    _touched: set[str] = field(default_factory=set, repr=False)

    # -- recording -------------------------------------------------------------------------
    def _touch(self, path: str) -> None:
        if path not in self._touched:
            self._touched.add(path)
            self.touched.append(path)

    def _resolve_parent(self, path: str) -> tuple[nn.Module, str]:
        if not path:
            raise ValueError("cannot replace the root module; edit its children instead")
        parent_path, _, leaf = path.rpartition(".")
        parent = self.model.get_submodule(parent_path) if parent_path else self.model
        return parent, leaf

    def path_of(self, module: nn.Module) -> str:
        """The dotted path of ``module`` inside the model (``""`` for the root)."""
        for path, candidate in self.model.named_modules(remove_duplicate=False):
            if candidate is module:
                return str(path)
        raise ValueError(f"{type(module).__name__} is not a submodule of the model being edited")

    # -- the edits ----------------------------------------------------------------------------
    def replace_module(self, path: str, new: nn.Module) -> nn.Module:
        """Put ``new`` at ``path``; return the module it replaces."""
        parent, leaf = self._resolve_parent(path)
        old = getattr(parent, leaf)
        if not isinstance(old, nn.Module):
            raise TypeError(f"{path!r} is a {type(old).__name__}, not an nn.Module")
        self._changes.append(_Change(parent, leaf, old, "module"))
        setattr(parent, leaf, new)
        self._touch(path)
        return old

    def set_attr(
        self, module: nn.Module, name: str, value: Any, *, path: str | None = None
    ) -> None:
        """Set ``module.name = value`` (a plain attribute, buffer, parameter or submodule).
        ``path``: the module's dotted path when the caller knows it (saves a search of the
        model: an edit of every module is then linear in the model's size)."""
        attributes = module.__dict__
        old = attributes.get(name, _MISSING)
        for store in _STORES:
            table = attributes.get(store)
            if table is not None and name in table:
                old = (store, table[name])
                break
        self._changes.append(_Change(module, name, old, "attr"))
        if (
            isinstance(old, tuple)
            and old
            and old[0] == "_buffers"
            and isinstance(value, torch.Tensor)
        ):
            module._buffers[name] = value
        elif not isinstance(old, tuple) and not isinstance(value, (torch.Tensor, nn.Module)):
            # a plain attribute: what ``nn.Module.__setattr__`` ends up doing, without its
            # checks (adapters mark every module of a model, once per adapter)
            object.__setattr__(module, name, value)
        else:
            setattr(module, name, value)
        self._touch(self.path_of(module) if path is None else path)

    def bind_forward(self, module: nn.Module, forward: Callable[..., Any]) -> None:
        """Make ``forward(module, *args, **kwargs)`` the forward of this one instance.

        The bound forward shows the signature of the forward it replaces
        (``inspect.signature(model.forward)`` is part of a model's public surface: test suites
        and Transformers itself read it), whatever parameters ``forward`` declares."""
        stock = _unbound(module.forward)
        shown = forward
        if stock is not None and isinstance(forward, types.FunctionType):
            shown = _with_signature(forward, inspect.signature(stock))
        self.set_attr(module, "forward", types.MethodType(shown, module))

    # -- undo -----------------------------------------------------------------------------------
    def rollback(self) -> None:
        """Undo every change, newest first. The edit is empty afterwards."""
        while self._changes:
            change = self._changes.pop()
            _restore(change)
        self.touched.clear()
        self._touched.clear()

    def __iter__(self) -> Iterator[str]:
        return iter(self.touched)

    def __len__(self) -> int:
        return len(self._changes)


def _unbound(forward: Any) -> Callable[..., Any] | None:
    """The function behind a module's (bound) forward, taking ``self`` first."""
    fn = getattr(forward, "__func__", None)
    return fn if callable(fn) else None


def _with_signature(fn: types.FunctionType, signature: inspect.Signature) -> types.FunctionType:
    """A copy of ``fn`` that reports ``signature`` (the original is left untouched: it may be
    bound to other modules too)."""
    copy = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__dict__.update(fn.__dict__)
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__signature__ = signature  # type: ignore[attr-defined]
    return copy


def _restore(change: _Change) -> None:
    owner, name, old = change.owner, change.name, change.old
    assert isinstance(owner, nn.Module)
    if change.kind == "module":
        setattr(owner, name, old)
        return
    # attribute: first remove whatever the edit put there
    attributes = owner.__dict__
    for store in _STORES:
        table = attributes.get(store)
        if table is not None:
            table.pop(name, None)
    attributes.pop(name, None)
    if old is _MISSING:
        return
    if isinstance(old, tuple) and len(old) == 2 and old[0] in _STORES:
        getattr(owner, old[0])[name] = old[1]
    else:
        owner.__dict__[name] = old
