"""The registry of the device's layout and capability rules, and what a rule is.

A rule (:class:`LayoutRule`) is a small function that looks at one op call (the host tensors
and arguments) and returns the reason it cannot lower, or ``None``. It is registered with its
gap id by :func:`layout_rule` and is active only while the catalogue says that gap is open at
the active release (:func:`active_rules`, ``Release.gap_open(gap)``). Rules are evaluated in
registration order and the first broken one decides. Also here: the stick and core geometry
the rules measure against, and the readers of op arguments the rules share.

The registered rules are :mod:`spyre_sim._layout_rules` (layout) and
:mod:`spyre_sim._capability_rules` (capability); import them all through
:mod:`spyre_sim.layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spyre_sim.catalogue import Release

__all__ = [
    "CORE_COUNT",
    "CORE_SPAN_BYTES",
    "STICK_BYTES",
    "Check",
    "LayoutRule",
    "active_rules",
    "layout_rule",
    "rules",
    "shape_of",
    "stick_elements",
    "tensors_in",
]

STICK_BYTES = 128
CORE_COUNT = 32
CORE_SPAN_BYTES = 256 * 1024 * 1024

Check = Callable[[str, Sequence[Any], Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class LayoutRule:
    """One rule: ``check(packet, args, kwargs)`` (host tensors) returns why the op cannot lower, or ``None``."""

    gap: str
    packets: frozenset[str] | None  # None: every op
    uses_args: bool  # reads non-tensor arguments (they join the decision cache key)
    layout: bool  # a layout rule (switched off by layout_checks=False) vs a capability rule
    check: Check
    text: str  # the real stack's error text, quoted in messages


_RULES: list[LayoutRule] = []


def layout_rule(
    gap: str,
    *,
    ops: Sequence[str] | None = None,
    uses_args: bool = False,
    layout: bool = True,
    text: str = "",
) -> Callable[[Check], Check]:
    """Register ``check`` as the rule of ``gap`` for the ATen packets ``ops`` (all if None)."""

    def register(check: Check) -> Check:
        packets = frozenset(ops) if ops is not None else None
        _RULES.append(LayoutRule(gap, packets, uses_args, layout, check, text))
        return check

    return register


def rules() -> tuple[LayoutRule, ...]:
    """Every registered rule."""
    return tuple(_RULES)


def _gap_open(release: Release, gap: str) -> bool:
    # every release (a user one too: it extends a built-in one) knows every built-in gap id,
    # so an unknown id is a misspelt rule: raise rather than switch the rule off
    return release.gap_open(gap)


def active_rules(release: Release, packet: str, layout_checks: bool) -> tuple[LayoutRule, ...]:
    """The rules that apply to ``packet`` at ``release`` (layout ones only if checks are on)."""
    return tuple(
        r
        for r in _RULES
        if (r.packets is None or packet in r.packets)
        and (layout_checks or not r.layout)
        and _gap_open(release, r.gap)
    )


def stick_elements(dtype: torch.dtype) -> int:
    """Elements per 128-byte stick for ``dtype``."""
    return STICK_BYTES // max(1, dtype.itemsize)


def tensors_in(args: Sequence[Any]) -> Iterator[torch.Tensor]:
    """The tensors among ``args``, and inside the lists and tuples among them."""
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b


def shape_of(t: torch.Tensor) -> list[int]:
    """``t``'s shape as a list, as messages quote it."""
    return list(t.shape)
