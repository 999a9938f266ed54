"""The stick-layout rewrites added after 2.0 in one torch-function mode (kind
``stick-layout-chain``).

``stick-align-padding`` 2.1.0 and ``head-padding`` 2.5.0 enable their rewrites as seven kinds
of :mod:`spyre_adapters.library._scoped_modes` (``stick-layout``, ``-folds``, ``-indexed``,
``-indexed-writes``, ``-int``, ``-sizes``, ``-writes-2``), each entered as a mode of its own.
Every torch call made while a forward runs, a read of ``.shape`` or ``.dim()`` included, then
passes through seven Python ``__torch_function__`` frames, though each mode rewrites only a
few functions (``linear`` and the matmuls, views, ``__getitem__``/``__setitem__``, in-place
ops) and hands every other call on unchanged.

:class:`StickLayoutChain` holds the six kinds after ``stick-layout`` (``stick-layout`` itself
stays a mode of its own: ``offset-slices`` adds its features to that kind, and one mode with
every adapter's features is what they were written for). The chain's kind sorts right after
``stick-layout``, where the six did, so it is entered above it as they were. It builds the six
modes as their kinds' factories build them and gives a call only to the modes that rewrite its
function, in the order the stack of modes gave it to them (the last kind by name first). When
a mode handles a call, the modes after it in that order are entered as a chain of their own
while it runs, so that what it calls (the stock function, or the ops of its rewrite) reaches
them exactly as it reached the modes below it on the stack. A call no mode rewrites is run at once. Which functions a mode
rewrites is read from the mode's own module (:data:`LINKS`): each of them hands on unchanged
every call whose function is not among them.

The settings of the kind are ``(kind, feature)`` pairs: the kinds a version of the adapters
enabled one by one, with the features each was given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.library import (
    _cut_writes,
    _cut_writes_v2,
    _stick_folds,
    _stick_layout,
    _stick_layout_indexed,
    _stick_layout_indexed_writes,
    _stick_layout_int,
    _stick_layout_sizes,
)
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind

__all__ = ["KIND", "LINKS", "Link", "StickLayoutChain", "enable"]

KIND = "stick-layout-chain"


@dataclass(frozen=True)
class Link:
    """One mode of the chain: its kind, how the kind's factory builds it from the kind's
    features, and which torch functions it rewrites (it hands every other call on)."""

    kind: str
    build: Callable[[frozenset[str]], TorchFunctionMode]
    rewrites: Callable[[Any], bool]


def _cuts_or_writes(func: Any) -> bool:
    return func in _cut_writes._CUTS or _cut_writes._in_place(func)


#: The modes in the order the stack of kinds gave them a call: last kind by name first.
LINKS: tuple[Link, ...] = (
    Link(
        _cut_writes_v2.KIND,
        lambda features: _cut_writes_v2.CutWritesUnwrapped(),
        _cuts_or_writes,
    ),
    Link(
        _stick_layout_sizes.KIND,
        lambda features: _stick_layout_sizes.IntegerSizes(),
        lambda func: func in _stick_layout_sizes._SHAPED or func in _stick_layout_sizes._UNFLATTEN,
    ),
    Link(
        _stick_layout_int.KIND,
        lambda features: _stick_layout_int.IntHeadSplit(),
        lambda func: func in _stick_layout_int._VIEWS or func in _stick_layout_int._UNFLATTENS,
    ),
    Link(
        _stick_layout_indexed_writes.KIND,
        _stick_layout_indexed_writes.IndexedCutWrites,
        lambda func: func is torch.Tensor.__setitem__,
    ),
    Link(
        _stick_layout_indexed.KIND,
        _stick_layout_indexed.IndexedCuts,
        lambda func: func is torch.Tensor.__getitem__,
    ),
    Link(
        _stick_folds.KIND,
        _stick_folds.StickFolds,
        lambda func: func in _stick_folds._MATMULS or func is torch.Tensor.__rmatmul__,
    ),
)

_BY_KIND = {link.kind: link for link in LINKS}


class StickLayoutChain(TorchFunctionMode):
    """The chained modes (see the module docstring): ``modes`` in call order, ``rewrites`` the
    matching predicates."""

    def __init__(
        self, modes: Sequence[TorchFunctionMode], rewrites: Sequence[Callable[[Any], bool]]
    ) -> None:
        super().__init__()
        self.modes = tuple(modes)
        self.rewrites = tuple(rewrites)
        self._first: dict[Any, int] = {}  # function -> index of the first mode rewriting it
        self._rest: dict[int, StickLayoutChain] = {}

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        first = self._first.get(func)
        if first is None:
            first = next(
                (i for i, rewrites in enumerate(self.rewrites) if rewrites(func)), len(self.modes)
            )
            self._first[func] = first
        if first == len(self.modes):
            return func(*args, **(kwargs or {}))
        mode = self.modes[first]
        if first + 1 == len(self.modes):
            return mode.__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]
        rest = self._rest.get(first)
        if rest is None:
            rest = self._rest[first] = StickLayoutChain(
                self.modes[first + 1 :], self.rewrites[first + 1 :]
            )
        with rest:
            return mode.__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


def _factory(settings: frozenset[Any]) -> StickLayoutChain:
    features: dict[str, set[str]] = {}
    for kind, feature in settings:
        features.setdefault(kind, set()).add(feature)
    links = [link for link in LINKS if link.kind in features]
    return StickLayoutChain(
        [link.build(frozenset(features[link.kind])) for link in links],
        [link.rewrites for link in links],
    )


register_kind(KIND, _factory)


def enable(model: nn.Module, edit: Any, kinds: Sequence[str], feature: str) -> None:
    """Enable ``kinds`` (stick-layout kinds, each with ``feature``) on every module of ``model``
    as one chained mode, through ``edit`` (a ``ModelEdit``)."""
    if feature not in _stick_layout.FEATURES:
        raise ValueError(
            f"unknown stick-layout feature {feature!r}; known: {sorted(_stick_layout.FEATURES)}"
        )
    unknown = sorted(set(kinds) - set(_BY_KIND))
    if unknown:
        raise ValueError(f"not chainable stick-layout kinds {unknown}; known: {sorted(_BY_KIND)}")
    enable_kind(model, edit, KIND, frozenset((kind, feature) for kind in kinds))
