"""The chained stick-layout mode with ``view_as`` / ``reshape_as`` in front (kind
``stick-layout-chain-2``).

:mod:`spyre_adapters.library._stick_layout_chain` (kind ``stick-layout-chain``) holds the six
stick-layout kinds after ``stick-layout`` and gives a call only to the modes rewriting its
function. This chain holds the same links, in the same order, behind one more in front:
:mod:`spyre_adapters.library._stick_layout_views_as`, which computes ``view_as`` and
``reshape_as`` as the ``view`` and ``reshape`` they are, so that a head split written with
them reaches the view rewrites after it. The mode is the same class
(:class:`~spyre_adapters.library._stick_layout_chain.StickLayoutChain`); the kind sorts right
after ``stick-layout-chain``, so it is entered where that chain was, above ``stick-layout``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from spyre_adapters.library import _stick_layout, _stick_layout_chain, _stick_layout_views_as
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout_chain import Link, StickLayoutChain

__all__ = ["KIND", "LINKS", "enable"]

KIND = "stick-layout-chain-2"

#: ``views-as`` first, then the links of ``stick-layout-chain`` in their order
LINKS: tuple[Link, ...] = (
    Link(
        _stick_layout_views_as.KIND,
        lambda features: _stick_layout_views_as.ViewsAs(),
        lambda func: func in _stick_layout_views_as.FUNCTIONS,
    ),
    *_stick_layout_chain.LINKS,
)

_BY_KIND = {link.kind: link for link in LINKS}


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
    """Enable ``kinds`` (links of this chain, each with ``feature``) on every module of
    ``model`` as one chained mode, through ``edit`` (a ``ModelEdit``)."""
    if feature not in _stick_layout.FEATURES:
        raise ValueError(
            f"unknown stick-layout feature {feature!r}; known: {sorted(_stick_layout.FEATURES)}"
        )
    unknown = sorted(set(kinds) - set(_BY_KIND))
    if unknown:
        raise ValueError(f"not chainable stick-layout kinds {unknown}; known: {sorted(_BY_KIND)}")
    enable_kind(model, edit, KIND, frozenset((kind, feature) for kind in kinds))
