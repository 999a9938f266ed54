"""SDPA called with contiguous q/k/v, wherever the model builds them (gap ``sdpa-strided``):
the ``contiguous-attention`` adapter, 1.1.

The SDPA math path of the stacks up to 2026.06 miscompiles when q, k or v is not contiguous
(wrong numbers, no error). 1.1 acts at the call itself: ``scaled_dot_product_attention``
receives ``q.contiguous()``, ``k.contiguous()`` and ``v.contiguous()``, whatever built them.

Version 1.0 (:mod:`spyre_adapters.library.contiguous_attention`) made q/k/v contiguous where
the attention module hands them to its kernel. That is not where SDPA gets them: Transformers'
``sdpa`` kernel builds new views after that point.

- Grouped-query attention repeats the k/v heads with ``repeat_kv`` (``expand`` then
  ``reshape``). With one KV head (multi-query attention) the reshape only merges a size-1 dim
  into the expanded one, so it returns a stride-0 view and copies nothing. SDPA then read
  that view with heads and positions mixed (cosine 0.3-0.7 with the CPU).
- A causal prefill into a larger static cache crops k/v to the query length: another view.
- Families that call ``torch.nn.functional.scaled_dot_product_attention`` from their own
  forward (Falcon, several vision encoders) never go through the registry at all.

The model's forwards run under a ``TorchFunctionMode`` of the scoped-mode kind
``contiguous-sdpa`` (:mod:`spyre_adapters.library._scoped_modes`: entered when any forward of
the model starts, the whole model or a submodule called directly), which intercepts
``torch.nn.functional.scaled_dot_product_attention`` and ``torch.ops.aten.
scaled_dot_product_attention``; every other call passes through. Scoped modes are entered in
kind-name order, so this one is entered first and is the outermost: it sees each SDPA call
last, after any other mode (and any forward-scoped mode of another adapter) has rewritten it.
That covers every kernel on the attention interface (``sdpa``, with or without
``enable_gqa``, the paged and user-registered kernels) and SDPA called directly. Eager
attention computes with ``matmul`` and ``softmax``, which have no strided-input gap, and is
left as it is. A contiguous copy holds the same values, so the results are the same as the
stock model's.

Matched structurally: a model with a module whose forward (decorators included) reaches SDPA
or the attention registry ``ALL_ATTENTION_FUNCTIONS``, directly or through the functions and
methods of the module it calls (up to :data:`REACH_DEPTH` calls deep).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function
from spyre_adapters.library._scoped_modes import enable, enabled, register_kind

__all__ = [
    "KIND",
    "REACH_DEPTH",
    "ContiguousSdpa",
    "ContiguousSdpaMode",
    "adapter",
    "reaches_sdpa",
]

KIND = "contiguous-sdpa"
"""The scoped-mode kind (sorted first among the library's kinds: the outermost mode)."""
_NAMES = frozenset({"scaled_dot_product_attention", "ALL_ATTENTION_FUNCTIONS"})
_OPERANDS = ("query", "key", "value")

REACH_DEPTH = 2
"""How many calls deep :func:`reaches_sdpa` follows module-level functions and methods."""


def _contiguous(value: Any) -> Any:
    return value.contiguous() if isinstance(value, torch.Tensor) else value


class ContiguousSdpaMode(TorchFunctionMode):
    """While active, SDPA receives contiguous q, k and v; everything else passes through."""

    _SDPA = frozenset(
        {
            nn.functional.scaled_dot_product_attention,
            torch.ops.aten.scaled_dot_product_attention,
            torch.ops.aten.scaled_dot_product_attention.default,
        }
    )

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in self._SDPA:
            args = tuple(_contiguous(a) if i < 3 else a for i, a in enumerate(args))
            for name in _OPERANDS:
                if name in kwargs:
                    kwargs[name] = _contiguous(kwargs[name])
        return func(*args, **kwargs)


def _decorated(fn: types.FunctionType, depth: int = 0) -> Iterator[types.FunctionType]:
    """``fn`` and the functions its decorators keep in closure cells."""
    yield fn
    if depth >= 6:
        return
    for cell in fn.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(content, types.FunctionType):
            yield from _decorated(content, depth + 1)


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and its nested functions load."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _own_method(cls: type, name: str) -> types.FunctionType | None:
    """The function ``cls`` (or a base outside torch) defines as ``name``, if any."""
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] == "torch":
            continue
        found = klass.__dict__.get(name)
        if isinstance(found, (staticmethod, classmethod)):
            found = found.__func__
        if isinstance(found, types.FunctionType):
            return found
    return None


def reaches_sdpa(module: nn.Module, fn: types.FunctionType) -> bool:
    """Whether ``fn`` (the forward of ``module``) names SDPA or the attention registry, itself or
    through the module-level functions and the methods of ``module`` it calls, up to
    :data:`REACH_DEPTH` calls deep."""
    seen: set[types.CodeType] = set()
    pending = [(fn, 0)]
    while pending:
        current, depth = pending.pop()
        for function in _decorated(current):
            if function.__code__ in seen:
                continue
            seen.add(function.__code__)
            names = _names(function.__code__)
            if names & _NAMES:
                return True
            if depth >= REACH_DEPTH:
                continue
            for name in names:
                callee = function.__globals__.get(name)
                if not isinstance(callee, types.FunctionType):
                    callee = _own_method(type(module), name)
                if callee is not None:
                    pending.append((callee, depth + 1))
    return False


def _factory(settings: frozenset[object]) -> ContiguousSdpaMode:
    return ContiguousSdpaMode()


register_kind(KIND, _factory)


class ContiguousSdpa:
    """The ``contiguous-attention`` adapter, version 1.1 (see the module docstring)."""

    name = "contiguous-attention"

    def matches(self, model: nn.Module) -> bool:
        if KIND in enabled(model):
            return False  # already adapted
        for module in model.modules():
            fn = forward_function(module)
            if fn is not None and reaches_sdpa(module, fn):
                return True
        return False

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        if not self.matches(model):
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: no forward reaches "
                "scaled_dot_product_attention or ALL_ATTENTION_FUNCTIONS"
            )
        enable(model, edit, KIND, frozenset())


adapter = ContiguousSdpa()
