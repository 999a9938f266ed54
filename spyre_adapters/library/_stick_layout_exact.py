"""The stick-layout rewrites with exact selections: kinds ``stick-layout-exact`` and
``stick-layout-exact-chain``.

The first generation (kind ``stick-layout``, :mod:`spyre_adapters.library._stick_layout`, and
the chain ``stick-layout-chain-2``, :mod:`spyre_adapters.library._stick_layout_chain_v2`)
computes refused cuts of the stick dim as 0/1 selection and placement matmuls, which turn an
infinity or a NaN of a row into NaN across every element computed from that row. This
generation makes the same rewrites, for the same calls, with the products of
:mod:`spyre_adapters.library._exact_selection`, which put every non-finite element where the
stock op puts it. On finite inputs every result is the first generation's, bit for bit.

- ``stick-layout-exact``: the first generation's mode, its handlers run as copies
  (:func:`~spyre_adapters.library._exact_selection.rebound`) that call the exact
  ``select_columns``, ``split_heads`` and ``assign_columns``; every other helper is the first
  generation's. Its features are the first generation's (:data:`FEATURES`).
- ``stick-layout-exact-chain``: the links of ``stick-layout-chain-2`` in their order, with
  the two that cut or write through a cut that comes with other indices
  (``stick-layout-indexed``, ``stick-layout-indexed-writes``) calling the exact functions.

Both kinds sort where the first generation's did among the other kinds (after
``sdpa-key-padding``, before ``unfolded-mha``), and the chain after the mode, so it is
entered above it, as ``stick-layout-chain-2`` is above ``stick-layout``.
"""

from __future__ import annotations

import types
from typing import Any

from spyre_adapters.library import (
    _exact_selection,
    _stick_layout,
    _stick_layout_chain_v2,
    _stick_layout_indexed,
    _stick_layout_indexed_writes,
)
from spyre_adapters.library._exact_selection import copied, rebound
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout_chain import Link

__all__ = [
    "CHAIN_KIND",
    "FEATURES",
    "KIND",
    "LINKS",
    "ExactIndexedCutWrites",
    "ExactIndexedCuts",
    "ExactStickLayout",
    "enable",
    "enable_chain",
]

KIND = "stick-layout-exact"
CHAIN_KIND = "stick-layout-exact-chain"
FEATURES = _stick_layout.FEATURES

_SELECTIONS = {
    "select_columns": _exact_selection.select_columns,
    "split_heads": _exact_selection.split_heads,
    "assign_columns": _exact_selection.assign_columns,
}


def _first_generation() -> dict[str, Any]:
    """The first generation's module namespace with its functions rebound to one another's
    copies and the three selections replaced: a handler calling ``_pieces_out`` or ``_view``
    reaches the copy, which calls the exact selection."""
    names = dict(vars(_stick_layout))
    for name, value in vars(_stick_layout).items():
        if isinstance(value, types.FunctionType) and value.__module__ == _stick_layout.__name__:
            names[name] = copied(value, names)
    names.update(_SELECTIONS)
    return names


_NAMES = _first_generation()
#: torch function -> the first generation's handler for it, calling the exact selections
_HANDLERS = {func: _NAMES[handler.__name__] for func, handler in _stick_layout._HANDLERS.items()}


class ExactStickLayout(_stick_layout.StickLayout):
    """The first generation's mode with exact selections (see the module docstring)."""

    __torch_function__ = rebound(
        _stick_layout.StickLayout.__torch_function__, {"_HANDLERS": _HANDLERS}
    )


class ExactIndexedCuts(_stick_layout_indexed.IndexedCuts):
    """``stick-layout-indexed``'s cuts with the exact ``select_columns``."""

    __torch_function__ = rebound(_stick_layout_indexed.IndexedCuts.__torch_function__, _SELECTIONS)


class ExactIndexedCutWrites(_stick_layout_indexed_writes.IndexedCutWrites):
    """``stick-layout-indexed-writes``' writes with the exact ``assign_columns``."""

    __torch_function__ = rebound(
        _stick_layout_indexed_writes.IndexedCutWrites.__torch_function__, _SELECTIONS
    )


_EXACT_LINKS = {
    _stick_layout_indexed.KIND: ExactIndexedCuts,
    _stick_layout_indexed_writes.KIND: ExactIndexedCutWrites,
}

#: ``stick-layout-chain-2``'s links in their order, the indexed cuts and writes exact
LINKS: tuple[Link, ...] = tuple(
    Link(link.kind, _EXACT_LINKS[link.kind], link.rewrites) if link.kind in _EXACT_LINKS else link
    for link in _stick_layout_chain_v2.LINKS
)
_BY_KIND = {link.kind: link for link in LINKS}


def _factory(features: frozenset[str]) -> ExactStickLayout:
    return ExactStickLayout(features)


#: ``stick-layout-chain-2``'s factory and validation, over :data:`LINKS` and this chain's kind
_chain_factory = rebound(_stick_layout_chain_v2._factory, {"LINKS": LINKS})

register_kind(KIND, _factory)
register_kind(CHAIN_KIND, _chain_factory)


#: ``enable(model, edit, feature)``: enable ``feature`` of ``stick-layout-exact`` on every module of
#: ``model`` through ``edit`` (a ``ModelEdit``); an unknown feature raises ``ValueError``
enable = rebound(_stick_layout.enable, {"KIND": KIND})
#: ``enable_chain(model, edit, kinds, feature)``: enable ``kinds`` (links of :data:`LINKS`, each
#: with ``feature``) on every module of ``model`` as one ``stick-layout-exact-chain`` mode
enable_chain = rebound(_stick_layout_chain_v2.enable, {"KIND": CHAIN_KIND, "_BY_KIND": _BY_KIND})
