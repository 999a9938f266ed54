"""The registry of the device's miscompile reproductions, and what a reproduction is.

A reproduction (:class:`Miscompile`) is keyed by its gap id and the ATen packet it acts on:
``apply(wrapped args, kwargs, host result)`` returns the wrong host result, or ``None`` when its
pattern is absent, or :class:`Unheld` when the device computes the result right and only the
emulator's fp16 host tensor could not hold it (the op is then computed again with its DL16
values kept: :mod:`spyre_sim._wide_values`). A :class:`Mark` is not a corruption but a note on an op's result that a later
reproduction reads. Both are registered with a decorator (:func:`register`,
:func:`register_mark`); the device tries an op's reproductions in registration order and the
first that returns a result decides.

The registered reproductions are :mod:`spyre_sim._miscompiles_ops`,
:mod:`spyre_sim._miscompiles_fp32`, :mod:`spyre_sim._miscompiles_memory` and
:mod:`spyre_sim._miscompiles_attention`; import them all through :mod:`spyre_sim.miscompile`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Apply",
    "Mark",
    "MarkFn",
    "Miscompile",
    "Unheld",
    "host_of",
    "marks_for",
    "miscompiles_for",
    "register",
    "register_mark",
    "registered",
    "registered_marks",
]

# apply(wrapped args, kwargs, host result) -> wrong host result, or None if the pattern is absent
Apply = Callable[[Sequence[Any], dict[str, Any], Any], Any]


@dataclass(frozen=True)
class Miscompile:
    gap: str
    packet: str
    apply: Apply


@dataclass(frozen=True)
class Unheld:
    """What a reproduction returns when the device holds the result and the emulator's fp16
    host tensor does not (``limit``: the emulator limit counted if it cannot be kept)."""

    limit: str


_BY_PACKET: dict[str, list[Miscompile]] = {}


def register(gap: str, packet: str) -> Callable[[Apply], Apply]:
    """Register the decorated function as the reproduction of ``gap`` for ``packet``."""

    def add(fn: Apply) -> Apply:
        _BY_PACKET.setdefault(packet, []).append(Miscompile(gap, packet, fn))
        return fn

    return add


# mark(wrapped args, kwargs) -> (attribute, value) to set on the result's wrapper, or None
MarkFn = Callable[[Sequence[Any], dict[str, Any]], "tuple[str, Any] | None"]


@dataclass(frozen=True)
class Mark:
    """Not a corruption: a note on an op's result that a later op's reproduction reads (while
    ``gap`` is miscompiled), e.g. ``neg`` of a slice, for ``rotate-half``'s ``cat``."""

    gap: str
    packet: str
    mark: MarkFn


_MARKS: dict[str, list[Mark]] = {}


def register_mark(gap: str, packet: str) -> Callable[[MarkFn], MarkFn]:
    """Register the decorated function as a mark of ``gap`` for ``packet``."""

    def add(fn: MarkFn) -> MarkFn:
        _MARKS.setdefault(packet, []).append(Mark(gap, packet, fn))
        return fn

    return add


def marks_for(packet: str) -> tuple[Mark, ...]:
    """Marks registered for an ATen packet."""
    return tuple(_MARKS.get(packet, ()))


def registered_marks() -> tuple[Mark, ...]:
    """Every registered mark."""
    return tuple(m for found in _MARKS.values() for m in found)


def miscompiles_for(packet: str) -> tuple[Miscompile, ...]:
    """Reproductions registered for an ATen packet."""
    return tuple(_BY_PACKET.get(packet, ()))


def registered() -> tuple[Miscompile, ...]:
    """Every registered reproduction."""
    return tuple(m for found in _BY_PACKET.values() for m in found)


def host_of(t: Any) -> Any:
    """The host tensor of a device tensor (anything else as it is)."""
    return getattr(t, "_host", t)
