"""``integer-pow`` 1.0.1: the behaviour of 1.0.0 (:mod:`spyre_adapters.library.integer_pow`),
matched in a fraction of the time.

1.0.0 decides whether a module's class raises to a power by disassembling every function of
the class and its bases, again for every module of the model and again for every model: a
Transformers test file builds its model a dozen times, and one SMOKE run of Llama and BERT
spent 6% of its wall time in ``dis``. 1.0.1 asks the same question of each code object once
per process (a code object never changes; its answer is kept by value, bounded). What it
matches, what it changes and every value it computes are 1.0.0's.
"""

from __future__ import annotations

import functools
import types

from torch import nn

from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.integer_pow import (
    _SHARED,
    KIND,
    IntegerPow,
    _codes,
    _raises_to_a_power,
)

__all__ = ["IntegerPowV101", "adapter", "computes_power"]


@functools.lru_cache(maxsize=8192)
def _raises(code: types.CodeType) -> bool:
    """Whether ``code`` or a function defined inside it raises to a power."""
    return any(_raises_to_a_power(inner) for inner in _codes(code))


def computes_power(cls: type) -> bool:
    """Whether ``cls`` or a base outside torch and Transformers' shared modules defines a
    function (not an initialiser) that raises to a power (1.0.0's question)."""
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(_SHARED):
            continue
        for name, value in vars(klass).items():
            if name.startswith(("__init", "_init", "init_")):
                continue
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(fn, types.FunctionType) and _raises(fn.__code__):
                return True
    return False


class IntegerPowV101(IntegerPow):
    """``integer-pow`` 1.0.1 (see the module docstring)."""

    def targets(self, model: nn.Module) -> list[str]:
        if KIND in enabled(model):
            return []  # already adapted
        answers: dict[type, bool] = {}
        found = []
        for path, module in model.named_modules():
            cls = type(module)
            if cls not in answers:
                answers[cls] = computes_power(cls)
            if answers[cls]:
                found.append(path)
        return found


adapter = IntegerPowV101()
