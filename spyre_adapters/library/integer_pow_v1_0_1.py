"""``integer-pow`` 1.0.1: the behaviour of 1.0.0 (:mod:`spyre_adapters.library.integer_pow`),
matched in a fraction of the time.

1.0.0 decides whether a module's class raises to a power by disassembling every function of
the class and its bases, again for every module of the model and again for every model: a
Transformers test file builds its model a dozen times, and one SMOKE run of Llama and BERT
spent 6% of its wall time in ``dis``. 1.0.1 asks 1.0.0's question once per class
(:class:`~spyre_adapters.library._class_answers.ClassAnswers`). What it matches, what it
changes and every value it computes are 1.0.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.library import integer_pow
from spyre_adapters.library._class_answers import ClassAnswers
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.integer_pow import KIND, IntegerPow

__all__ = ["IntegerPowV101", "adapter", "computes_power"]

computes_power = ClassAnswers(integer_pow.computes_power)
"""1.0.0's ``computes_power``, asked once per class."""


class IntegerPowV101(IntegerPow):
    """``integer-pow`` 1.0.1 (see the module docstring)."""

    def targets(self, model: nn.Module) -> list[str]:
        if KIND in enabled(model):
            return []  # already adapted
        return [path for path, module in model.named_modules() if computes_power(type(module))]


adapter = IntegerPowV101()
