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
from collections.abc import Sequence
from typing import Any

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._class_answers import ClassAnswers
from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector
from spyre_adapters.library.einsum_pieces import _codes
from spyre_adapters.library.take_along_gather import (
    _NAME,
    TakeAlongGather,
    TakeAlongGatherAdapter,
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
    """1.0.0's mode (a ``TorchFunctionMode``), also for ``take_along_dim(input=..., ...)``:
    the tensor given by keyword is passed by position to 1.0.0's computation."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if kwargs and not args and "input" in kwargs and getattr(func, "__name__", None) == _NAME:
            kwargs = dict(kwargs)
            args = (kwargs.pop("input"),)
        return super().__torch_function__(func, types, args, kwargs)


def _functions(klass: type) -> list[types.FunctionType]:
    found = []
    for value in vars(klass).values():
        fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(fn, types.FunctionType):
            found.append(fn)
    return found


def _class_takes_along(cls: type) -> bool:
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(("torch.", _GENERATION)):
            continue
        for fn in _functions(klass):
            if any(_NAME in code.co_names for code in _codes(fn.__code__)):
                return True
    return False


def _generation_takes_along(cls: type) -> bool:
    for klass in cls.__mro__:
        if not klass.__module__.startswith(_GENERATION):
            continue
        if any(code_mentions(fn, _NAME) for fn in _functions(klass)):
            return True
    return False


class_takes_along = ClassAnswers(_class_takes_along)
"""Whether a class or a base outside torch and ``transformers.generation`` defines a function
naming ``take_along_dim``."""

generation_takes_along = ClassAnswers(_generation_takes_along)
"""Whether a function of a class of the MRO defined in ``transformers.generation`` names
``take_along_dim`` (beam search's ``_gather_beams``)."""


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
