"""``take-along-gather`` 1.1.0: 1.0.0 (:mod:`spyre_adapters.library.take_along_gather`) also
around ``generate``, and for keyword arguments.

Beam search keeps its beams with ``torch.take_along_dim(input=..., indices=..., dim=1)``
(``GenerationMixin._gather_beams``, Transformers 5.x), in the generation loop rather than in a
forward: every beam-search test of Llama's whole test file stopped there at 2026.09 (gap
``int64-storage``), and 1.0.0, which binds forwards only and read the tensor positionally,
could not reach it. 1.1.0

- computes ``take_along_dim`` as ``gather`` whether its tensor comes by position or as
  ``input=`` (the values are the stock ones exactly, as in 1.0.0);
- binds the forwards of the modules whose forward (decorator chain included) or class names
  ``take_along_dim``, as 1.0.0 does, except that functions of ``transformers.generation`` no
  longer count: 1.0.0 found beam search's ``_gather_beams`` in every generative model's class
  and ran its whole forward inside the mode, where nothing calls ``take_along_dim``;
- and, where the model has a ``generate`` whose generation code (a function of a class of the
  model's MRO from ``transformers.generation``) names ``take_along_dim``, binds ``generate``
  through the model's edit so that a whole generation call runs inside the mode: the loop's
  bookkeeping is the model's computation (the model scope of ``pytest --spyre``).

Matched where either finds something; nothing the model shows changes (``generate`` is an
instance attribute the edit removes again).
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector
from spyre_adapters.library.einsum_pieces import _codes
from spyre_adapters.library.take_along_gather import (
    _NAME,
    TakeAlongGather,
    TakeAlongGatherAdapter,
    take_along,
)

__all__ = [
    "TakeAlongGatherV11",
    "TakeAlongKeywords",
    "adapter",
    "class_takes_along",
    "generation_takes_along",
]

_MARK = "_spyre_take_along_gather_v11"
_GENERATION = "transformers.generation"


class TakeAlongKeywords(TakeAlongGather):
    """1.0.0's mode (a ``TorchFunctionMode``) with keywords: computes ``take_along_dim`` as ``gather`` with its arguments given by position or by
    keyword (``input``, ``indices``, ``dim``); every other call runs unchanged."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        # by name: spyre_sim wraps take_along_dim to name the gap an int32 index meets
        if getattr(func, "__name__", None) == _NAME and not kwargs.keys() - {
            "input",
            "indices",
            "dim",
        }:
            values = args[0] if args else kwargs.get("input")
            indices = args[1] if len(args) > 1 else kwargs.get("indices")
            dim = args[2] if len(args) > 2 else kwargs.get("dim")
            if (
                isinstance(values, torch.Tensor)
                and isinstance(indices, torch.Tensor)
                and values.dim() == indices.dim()
                and (dim is None or (isinstance(dim, int) and not isinstance(dim, bool)))
            ):
                result = take_along(values, indices, dim)
                if result is not None:
                    return result
        return func(*args, **kwargs)


def _functions(klass: type) -> list[types.FunctionType]:
    found = []
    for value in vars(klass).values():
        fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(fn, types.FunctionType):
            found.append(fn)
    return found


def _kept(table: weakref.WeakKeyDictionary[type, bool], cls: type, ask: Any) -> bool:
    """``ask(cls)``, kept per class for as long as the class lives (classes do not change
    their functions once Transformers has built them)."""
    answer = table.get(cls)
    if answer is None:
        answer = table[cls] = bool(ask(cls))
    return answer


_CLASSES: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
_GENERATIONS: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def class_takes_along(cls: type) -> bool:
    """Whether ``cls`` or a base outside torch and ``transformers.generation`` defines a
    function naming ``take_along_dim``."""
    return _kept(_CLASSES, cls, _class_takes_along)


def _class_takes_along(cls: type) -> bool:
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(("torch.", _GENERATION)):
            continue
        for fn in _functions(klass):
            if any(_NAME in code.co_names for code in _codes(fn.__code__)):
                return True
    return False


def generation_takes_along(cls: type) -> bool:
    """Whether a function of a class of ``cls``'s MRO defined in ``transformers.generation``
    names ``take_along_dim`` (beam search's ``_gather_beams``)."""
    return _kept(_GENERATIONS, cls, _generation_takes_along)


def _generation_takes_along(cls: type) -> bool:
    for klass in cls.__mro__:
        if not klass.__module__.startswith(_GENERATION):
            continue
        if any(code_mentions(fn, _NAME) for fn in _functions(klass)):
            return True
    return False


class TakeAlongGatherV11(TakeAlongGatherAdapter):
    """``take-along-gather`` 1.1.0 (see the module docstring)."""

    missing = "no module whose forward or class calls take_along_dim, and no generate that does"
    mode = TakeAlongKeywords
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        def selected(module: nn.Module, fn: types.FunctionType) -> bool:
            return code_mentions(fn, _NAME) or class_takes_along(type(module))

        return selected

    def binds_generate(self, model: nn.Module) -> bool:
        """Whether ``model.generate`` is to run inside the mode (and does not yet)."""
        stock = getattr(model, "generate", None)
        if not callable(stock) or getattr(getattr(stock, "__func__", None), _MARK, False):
            return False
        return generation_takes_along(type(model))

    def matches(self, model: nn.Module) -> bool:
        return bool(self.targets(model)) or self.binds_generate(model)

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = self.targets(model)
        generation = self.binds_generate(model)
        if not targets and not generation:
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: {self.missing}"
            )
        if targets:
            self.edit_targets(model, edit, targets)
        if generation:
            current: Any = model.generate
            mode = self.mode

            def generate(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
                with mode():
                    return current(*args, **kwargs)

            setattr(generate, _MARK, True)
            edit.set_attr(model, "generate", types.MethodType(generate, model), path="")


adapter = TakeAlongGatherV11()
