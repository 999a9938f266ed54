"""Structural questions about a module's class, answered once per class.

Adapters match models by what their classes' functions say (a name they call, an operator
they use), and a Transformers test file builds its model a dozen times: asking again for every
module of every model costs a measurable part of a run. :class:`ClassAnswers` keeps each
answer for as long as the class lives (weakly: a class built and dropped at run time is not
kept alive). Transformers' classes do not change their functions once built; an adapter that
binds a forward binds it on the instance, which a class question does not read.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

__all__ = ["ClassAnswers"]


class ClassAnswers:
    """``answers(cls)``: ``ask(cls)``, asked once per class."""

    def __init__(self, ask: Callable[[type], bool]) -> None:
        self._ask = ask
        self._kept: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()

    def __call__(self, cls: type) -> bool:
        answer = self._kept.get(cls)
        if answer is None:
            answer = self._kept[cls] = bool(self._ask(cls))
        return answer
