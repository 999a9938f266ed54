"""The data model of the stack catalogue: gaps, op rules, releases and their upstream states.

Frozen dataclasses and enums, built by the loader (:mod:`spyre_sim.catalogue._loading`) and
never changed afterwards. A :class:`Release` carries the full picture at that release (every
gap's state, every op rule), not only its delta; :meth:`Release.op_rule` costs two
``dict.get`` calls.
"""

from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from packaging.version import Version

from spyre_sim.errors import SpyreSimError

#: The newest release-file ``schema_version`` this loader reads. Version 2 adds the
#: provenance keys: ``release.upstream``, ``source`` on op rules and the table form of gap
#: states (``{state, source, note}``). Version 1 files stay valid; they may not use those keys.
SCHEMA_VERSION = 2


#: Every ``schema_version`` this loader reads.
SCHEMA_VERSIONS = (1, 2)


#: The gap named by the rule for an op that a release does not mention at all.
UNLOWERED_GAP = "unlowered-op"


class GapNature(enum.Enum):
    """How a gap behaves over time."""

    TRANSITIONAL = "transitional"  # the stack closes it some day; adapters are scaffolding
    LASTING = "lasting"  # a property of the hardware; never closed; adapters are permanent
    REGRESSION = "regression"  # was closed, opens in a release, closes again later


class GapState(enum.Enum):
    """The state of a gap at one release. Only ``CLOSED`` counts as closed for the lifecycle."""

    OPEN = "open"  # the ops/patterns of the gap fail: unsupported
    FALLBACK = "fallback"  # they run on the host (cpu-fallback)
    MISCOMPILED = "miscompiled"  # they run on the device and return wrong numbers
    CLOSED = "closed"  # they lower natively


class Decision(enum.Enum):
    """What the stack does with one ATen op (docs/STACK.md §4)."""

    NATIVE = "native"
    DECOMPOSED = "decomposed"
    FALLBACK = "cpu-fallback"
    UNSUPPORTED = "unsupported"
    MISCOMPILED = "miscompiled"

    @property
    def runs_on_device(self) -> bool:
        """The op runs on the device (native, decomposed into native ops, or miscompiled)."""
        return self in _ON_DEVICE


_ON_DEVICE = frozenset({Decision.NATIVE, Decision.DECOMPOSED, Decision.MISCOMPILED})


_LOWERED = frozenset({Decision.NATIVE, Decision.DECOMPOSED})


_RUNS = frozenset(set(Decision) - {Decision.UNSUPPORTED})


@dataclass(frozen=True)
class Gap:
    """A gap between what models do and what the stack lowers (docs/STACK.md §6)."""

    id: str
    title: str
    nature: GapNature
    ops: tuple[str, ...]
    description: str

    @property
    def lasting(self) -> bool:
        return self.nature is GapNature.LASTING


@dataclass(frozen=True)
class OpRule:
    """The decision for one op at one release; ``gap`` is set for every decision that is not
    ``native``/``decomposed``; ``note`` says why when the evidence is silent; ``source`` names
    the evidence (``"#3782"``: a torch-spyre PR or issue; ``"docs/STACK.md §5"``)."""

    decision: Decision
    gap: str | None
    note: str = ""
    source: tuple[str, ...] = ()


@dataclass(frozen=True)
class UpstreamCommit:
    """An upstream torch-spyre commit known to be part of a release's upstream state, with the
    evidence that dates it (a PR or issue that names the commit)."""

    sha: str
    date: _dt.date
    source: tuple[str, ...]


@dataclass(frozen=True)
class Upstream:
    """The dated upstream state a release reproduces: torch-spyre ``main`` from ``start`` to
    ``end`` (both included), the commits known to fall in it, and the overall evidence."""

    start: _dt.date
    end: _dt.date
    commits: tuple[UpstreamCommit, ...] = ()
    sources: tuple[str, ...] = ()

    def covers(self, day: _dt.date) -> bool:
        return self.start <= day <= self.end


def _no_sources() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({})


def _no_notes() -> Mapping[str, str]:
    return MappingProxyType({})


_UNLOWERED_RULE = OpRule(
    Decision.UNSUPPORTED,
    UNLOWERED_GAP,
    "the stack release does not mention this op, so it has no kernel for it",
)


@dataclass(frozen=True)
class Release:
    """One stack release with every gap state and every op rule merged from its bases.

    ``op_rules`` keys are ATen packets (``"aten.add"``) or overloads (``"aten.add.Tensor"``);
    an overload key beats its packet key. Hash and equality use ``name`` and ``source``.
    """

    name: str
    version: Version
    base: str | None
    date: _dt.date
    summary: str
    source: str
    gap_states: Mapping[str, GapState]
    op_rules: Mapping[str, OpRule]
    #: the upstream state the release reproduces (``None``: the file does not say)
    upstream: Upstream | None = None
    #: gap id -> evidence of the line (in this release or a base) that set its current state
    gap_sources: Mapping[str, tuple[str, ...]] = field(default_factory=_no_sources)
    #: gap id -> note of the line that set its current state (why, where the evidence is silent)
    gap_notes: Mapping[str, str] = field(default_factory=_no_notes)
    #: the gap ids and op keys this release's own file sets (its delta on its base)
    own_gaps: frozenset[str] = frozenset()
    own_ops: frozenset[str] = frozenset()

    @property
    def delta_sources(self) -> tuple[str, ...]:
        """Every source cited by this release's own lines and its upstream table, in order of
        first appearance."""
        seen: dict[str, None] = {}
        if self.upstream is not None:
            seen.update(dict.fromkeys(self.upstream.sources))
        for gap_id in sorted(self.own_gaps):
            seen.update(dict.fromkeys(self.gap_sources.get(gap_id, ())))
        for op in sorted(self.own_ops):
            seen.update(dict.fromkeys(self.op_rules[op].source))
        return tuple(seen)

    def __hash__(self) -> int:
        return hash((self.name, self.source))

    def __repr__(self) -> str:
        return f"Release({self.name!r}, source={self.source!r})"

    def gap_state(self, gap_id: str) -> GapState:
        """The state of ``gap_id`` at this release; unknown ids raise :class:`SpyreSimError`."""
        try:
            return self.gap_states[gap_id]
        except KeyError:
            raise SpyreSimError(
                f"unknown gap id {gap_id!r} at stack {self.name}; "
                f"known gaps: {', '.join(sorted(self.gap_states))}"
            ) from None

    def gap_open(self, gap_id: str) -> bool:
        """The gap is not closed at this release (open, fallback or miscompiled)."""
        return self.gap_state(gap_id) is not GapState.CLOSED

    def op_rule(self, packet: str, overload: str = "default") -> OpRule:
        """The rule for ``packet`` (``"aten.add"``) with ``overload`` (``"Tensor"``).

        The overload key (``"aten.add.Tensor"``) beats the packet key; an op the release does
        not mention is ``unsupported`` with gap ``unlowered-op``.
        """
        rules = self.op_rules
        rule = rules.get(f"{packet}.{overload}")
        if rule is None:
            rule = rules.get(packet, _UNLOWERED_RULE)
        return rule


def packet_of(op: str) -> str:
    """The overload packet an op rule key or a qualified op name belongs to: ``aten.add`` of
    ``aten.add.Tensor`` (a packet's own name is returned as it is)."""
    return ".".join(op.split(".")[:2])


@dataclass(frozen=True)
class StackResolution:
    """How an upstream version string was mapped to a release of the catalogue.

    ``kind`` is ``"commit"`` (``0.0.1+g<sha>``, a ``torch_spyre.__version__`` with a commit
    the catalogue lists) or ``"image"`` (a dated CI image tag such as ``release-2026-09-22``);
    ``day`` is the upstream date; ``exact`` is false when the date lies after the newest
    release's upstream range (the newest release is used, and later upstream changes are
    not modelled); ``message`` says all of it in one line.
    """

    spec: str
    kind: str
    day: _dt.date
    release: Release
    exact: bool
    message: str
