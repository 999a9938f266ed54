"""The stack-release catalogue: which ATen ops a Spyre stack release lowers, and the state of
every gap at that release.

The catalogue is data (``spyre_sim/data/*.toml``, format in ``spyre_sim/data/README.md``),
parsed here into frozen dataclasses. Every release is a delta on its ``base``; loading merges
the deltas so that each :class:`Release` carries the full picture (every gap's state, every op
rule). Validation reports every problem of every file at once in one :class:`CatalogueError`.

Provenance (release-file schema 2): a release names the upstream torch-spyre state it
reproduces (:class:`Upstream`: a date range and known commits) and each delta line its evidence
(``OpRule.source``, ``Release.gap_sources``). :meth:`Catalogue.diff` says what changes between
two releases and who set it; :func:`resolve_upstream` maps an upstream version string
(``0.0.1+g<sha>``, ``release-2026-09-22``) to the release covering it.

Lookups are plain dict reads: :meth:`Release.op_rule` costs two ``dict.get`` calls, and the
built-in catalogue is parsed once per process (:func:`builtin_catalogue` is cached).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import enum
import functools
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from spyre_sim.errors import CatalogueError, SpyreSimError, SpyreStackResolutionWarning
from spyre_sim.state import device_state

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "UNLOWERED_GAP",
    "Catalogue",
    "CatalogueDiff",
    "Decision",
    "Gap",
    "GapChange",
    "GapNature",
    "GapState",
    "OpChange",
    "OpRule",
    "Release",
    "StackResolution",
    "Upstream",
    "UpstreamCommit",
    "builtin_catalogue",
    "catalogue_for",
    "load_release_file",
    "resolve_stack",
    "resolve_upstream",
]

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


@dataclass(frozen=True)
class GapChange:
    """A gap whose state differs between two releases."""

    gap: str
    before: GapState | None
    after: GapState
    set_in: str  # the release whose file set ``after``
    source: tuple[str, ...]
    note: str = ""

    @property
    def miscompile(self) -> str | None:
        """``"appears"`` / ``"goes"`` when the change starts or ends a miscompile."""
        if self.after is GapState.MISCOMPILED and self.before is not GapState.MISCOMPILED:
            return "appears"
        if self.before is GapState.MISCOMPILED and self.after is not GapState.MISCOMPILED:
            return "goes"
        return None


@dataclass(frozen=True)
class OpChange:
    """An op key whose decision or gap differs between two releases."""

    op: str
    before: OpRule
    after: OpRule
    set_in: str

    @property
    def miscompile(self) -> str | None:
        was = self.before.decision is Decision.MISCOMPILED
        now = self.after.decision is Decision.MISCOMPILED
        return "appears" if now and not was else "goes" if was and not now else None


@dataclass(frozen=True)
class CatalogueDiff:
    """What changes from release ``old`` to release ``new`` (see :meth:`Catalogue.diff`)."""

    old: str
    new: str
    gaps: tuple[GapChange, ...]
    ops: tuple[OpChange, ...]

    @property
    def miscompiles(self) -> tuple[GapChange | OpChange, ...]:
        """The changes that start or end a miscompile (gap states and op decisions)."""
        changes: list[GapChange | OpChange] = [*self.gaps, *self.ops]
        return tuple(c for c in changes if c.miscompile is not None)


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


class Catalogue:
    """An ordered set of releases (oldest first) and the gaps they describe."""

    def __init__(self, releases: Iterable[Release], gaps: Mapping[str, Gap]) -> None:
        ordered = tuple(sorted(releases, key=lambda r: r.version))
        if not ordered:
            raise SpyreSimError("a catalogue needs at least one release")
        self.releases: tuple[Release, ...] = ordered
        self.gaps: Mapping[str, Gap] = MappingProxyType(dict(gaps))
        self._by_name: dict[str, Release] = {r.name: r for r in ordered}

    def __repr__(self) -> str:
        return f"Catalogue({', '.join(self.names)})"

    def __iter__(self) -> Iterator[Release]:
        return iter(self.releases)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        """Release names, oldest first."""
        return tuple(r.name for r in self.releases)

    @property
    def newest(self) -> Release:
        return self.releases[-1]

    def release(self, name: str) -> Release:
        """The release called ``name`` (``"2026.05"``; ``"2026.5"`` is accepted too)."""
        found = self._by_name.get(name)
        if found is not None:
            return found
        try:
            wanted = Version(name)
        except InvalidVersion:
            wanted = None
        for candidate in self.releases:
            if candidate.version == wanted:
                return candidate
        raise SpyreSimError(
            f"unknown stack release {name!r}; valid releases: {', '.join(self.names)}; "
            "or give the path of a release TOML file that extends one of them"
        )

    def gap(self, gap_id: str) -> Gap:
        """The gap called ``gap_id``; unknown ids raise :class:`SpyreSimError` listing them."""
        try:
            return self.gaps[gap_id]
        except KeyError:
            raise SpyreSimError(
                f"unknown gap id {gap_id!r}; known gaps: {', '.join(sorted(self.gaps))}"
            ) from None

    def timeline(self, gap_id: str) -> list[tuple[str, GapState]]:
        """``[(release name, state of the gap)]`` for every release, oldest first."""
        self.gap(gap_id)
        return [(r.name, r.gap_states[gap_id]) for r in self.releases]

    def first_closing(self, gap_id: str, at: str) -> str | None:
        """The first release at or after ``at`` where the gap is ``CLOSED``; ``None`` if none.

        ``at`` is a release name; it need not be in this catalogue (it is compared as a
        version), so a user release outside the catalogue can ask about the built-in ones.
        """
        self.gap(gap_id)
        try:
            start = Version(at)
        except InvalidVersion:
            raise SpyreSimError(f"release name {at!r} is not a version") from None
        for candidate in self.releases:
            if candidate.version >= start and candidate.gap_states[gap_id] is GapState.CLOSED:
                return candidate.name
        return None

    def gap_changes(self, name: str) -> dict[str, tuple[GapState | None, GapState]]:
        """The gaps whose state release ``name`` changes: ``{gap: (state at its base, state at
        name)}``; for the first release every gap, with ``None`` as the old state. Answers
        "what does this release close (or re-open)?"."""
        release = self.release(name)
        base = self._by_name.get(release.base) if release.base is not None else None
        changes: dict[str, tuple[GapState | None, GapState]] = {}
        for gap_id, state in release.gap_states.items():
            old = base.gap_states.get(gap_id) if base is not None else None
            if old is not state:
                changes[gap_id] = (old, state)
        return changes

    def op_timeline(self, packet: str, overload: str = "default") -> list[tuple[str, OpRule]]:
        """``[(release name, rule for the op)]`` for every release, oldest first."""
        return [(r.name, r.op_rule(packet, overload)) for r in self.releases]

    def first_running(self, packet: str, at: str, overload: str = "default") -> str | None:
        """The first release at or after ``at`` where the op runs at all (any decision but
        ``unsupported``: a cpu-fallback counts); ``None`` if none. Complements
        :meth:`first_closing` in error messages: ``aten.embedding`` fails at 2025.12, runs
        (as a fallback) from 2026.02, and its gap closes in 2026.08."""
        return self._first(packet, overload, at, _RUNS)

    def first_lowering(self, packet: str, at: str, overload: str = "default") -> str | None:
        """The first release at or after ``at`` where the op is native or decomposed."""
        return self._first(packet, overload, at, _LOWERED)

    def _first(
        self, packet: str, overload: str, at: str, decisions: frozenset[Decision]
    ) -> str | None:
        try:
            start = Version(at)
        except InvalidVersion:
            raise SpyreSimError(f"release name {at!r} is not a version") from None
        for candidate in self.releases:
            if (
                candidate.version >= start
                and candidate.op_rule(packet, overload).decision in decisions
            ):
                return candidate.name
        return None

    def covering(self, day: _dt.date) -> Release | None:
        """The release whose upstream range contains ``day``, or ``None``."""
        for candidate in self.releases:
            if candidate.upstream is not None and candidate.upstream.covers(day):
                return candidate
        return None

    def commit(self, sha: str) -> tuple[Release, UpstreamCommit] | None:
        """The release listing upstream commit ``sha`` (a prefix of at least 7 hex digits
        matches a longer listed sha, and a listed short sha matches a longer one given)."""
        found = [
            (candidate, commit)
            for candidate in self.releases
            if candidate.upstream is not None
            for commit in candidate.upstream.commits
            if commit.sha.startswith(sha) or sha.startswith(commit.sha)
        ]
        if len(found) > 1:
            raise SpyreSimError(
                f"upstream commit {sha!r} is ambiguous: it matches "
                + ", ".join(f"{c.sha} ({r.name})" for r, c in found)
            )
        return found[0] if found else None

    def diff(self, old: str, new: str) -> CatalogueDiff:
        """What changes from release ``old`` to release ``new`` (``old`` must be older): gap
        states, op rules, and the miscompiles that appear or go. Each change names the
        release in ``(old, new]`` whose file set the new value, and that line's evidence."""
        a, b = self.release(old), self.release(new)
        if not a.version < b.version:
            raise SpyreSimError(
                f"a diff goes from an older release to a newer one (got {a.name} -> {b.name}); "
                f"swap them: --diff {b.name} {a.name}"
            )
        between = [r for r in self.releases if a.version < r.version <= b.version]
        gaps: list[GapChange] = []
        for gap_id in sorted(set(a.gap_states) | set(b.gap_states)):
            before, after = a.gap_states.get(gap_id), b.gap_states.get(gap_id)
            if before is after or after is None:
                continue
            set_in = next((r.name for r in reversed(between) if gap_id in r.own_gaps), b.name)
            gaps.append(
                GapChange(
                    gap_id,
                    before,
                    after,
                    set_in,
                    b.gap_sources.get(gap_id, ()),
                    b.gap_notes.get(gap_id, ""),
                )
            )
        ops: list[OpChange] = []
        for key in sorted(set(a.op_rules) | set(b.op_rules)):
            before_rule = a.op_rules.get(key, _UNLOWERED_RULE)
            after_rule = b.op_rules.get(key, _UNLOWERED_RULE)
            if (before_rule.decision, before_rule.gap) == (after_rule.decision, after_rule.gap):
                continue
            set_in = next((r.name for r in reversed(between) if key in r.own_ops), b.name)
            ops.append(OpChange(key, before_rule, after_rule, set_in))
        return CatalogueDiff(a.name, b.name, tuple(gaps), tuple(ops))

    def with_release_file(self, path: str | os.PathLike[str]) -> Catalogue:
        """A new catalogue: this one plus the user release in the TOML file at ``path``."""
        added = load_release_file(path, self)
        return Catalogue((*self.releases, added), self.gaps)

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> Catalogue:
        """Load a whole catalogue (``gaps.toml`` plus one TOML file per release)."""
        root = Path(directory)
        files = sorted(p for p in root.glob("*.toml"))
        return _load_catalogue([(str(p), p.read_bytes()) for p in files])


@functools.cache
def builtin_catalogue() -> Catalogue:
    """The releases shipped in ``spyre_sim/data`` (parsed once per process)."""
    data = resources.files("spyre_sim.data")
    files = sorted(
        (entry for entry in data.iterdir() if entry.name.endswith(".toml")),
        key=lambda entry: entry.name,
    )
    return _load_catalogue([(str(entry), entry.read_bytes()) for entry in files])


def catalogue_for(release: Release) -> Catalogue:
    """The catalogue ``release`` belongs to: the built-in one, or for a user release the
    built-in one extended by it, so that ``catalogue_for(r).first_closing(gap, r.name)`` also
    sees a gap the user release itself closes."""
    builtin = builtin_catalogue()
    if builtin._by_name.get(release.name) is release:
        return builtin
    extended = device_state.extended.get(release)
    if extended is None:
        others = (r for r in builtin.releases if r.version != release.version)
        extended = Catalogue((*others, release), builtin.gaps)
        device_state.extended[release] = extended
    return extended


def load_release_file(
    path: str | os.PathLike[str], base_catalogue: Catalogue | None = None
) -> Release:
    """Parse a user release file that extends a release of ``base_catalogue`` (default: the
    built-in catalogue). Every problem in the file is reported at once (:class:`CatalogueError`).
    """
    catalogue = base_catalogue if base_catalogue is not None else builtin_catalogue()
    source = os.fspath(path)
    try:
        raw = Path(source).read_bytes()
    except OSError as exc:
        raise CatalogueError(
            [
                f"{source}: <file>: cannot read the release file: {exc.strerror} (got {_show(source)})"
            ]
        ) from None
    reader = _Reader(source)
    delta = reader.release_file(raw)
    if delta is None:
        raise CatalogueError(reader.problems)
    problems = reader.problems
    if delta.name in catalogue or any(r.version == delta.version for r in catalogue):
        problems.append(
            f"{source}: release.name: a release with this name already exists in the catalogue "
            f"({', '.join(catalogue.names)}); choose a new name (got {_show(delta.name)})"
        )
    base: Release | None = None
    if delta.base is None:
        problems.append(
            f"{source}: release.base: a user release must extend a release of the catalogue "
            f"({', '.join(catalogue.names)}) (got nothing)"
        )
    elif delta.base not in catalogue:
        problems.append(
            f"{source}: release.base: unknown base release; valid releases: "
            f"{', '.join(catalogue.names)} (got {_show(delta.base)})"
        )
    else:
        base = catalogue.release(delta.base)
        if delta.version is not None and not delta.version > base.version:
            problems.append(
                f"{source}: release.name: a release must sort after its base {base.name} "
                f"(got {_show(delta.name)})"
            )
        if delta.date is not None and delta.date < base.date:
            problems.append(
                f"{source}: release.date: a release cannot predate its base {base.name} "
                f"({base.date.isoformat()}) (got {_show(delta.date)})"
            )
        _check_upstream_order(delta, base.name, base.upstream, problems)
        known = [
            _Delta(r.source, r.name, r.version, r.base, r.date, "", {}, {}, {}, r.upstream)
            for r in catalogue.releases
        ]
        _check_commits_unique([*known, delta], problems)
    _check_gap_refs(delta, catalogue.gaps, problems)
    if base is not None:
        for key, rule in delta.op_rules.items():
            if _packet_of(key) in base.op_rules or key in base.op_rules:
                continue
            if not delta.rule_is_table.get(key, False) or not rule.note:
                problems.append(
                    f"{source}: ops.{_show(key)}: op not known to base release {base.name}; "
                    "a new op needs a full table rule with a note, e.g. "
                    '{decision = "native", note = "why"} (check the spelling) '
                    f"(got {_show_rule(rule, delta.rule_is_table.get(key, False))})"
                )
    if problems or base is None or delta.version is None or delta.date is None:
        raise CatalogueError(problems)
    release = _merge(delta, base)
    _check_consistency(release, problems)
    if problems:
        raise CatalogueError(problems)
    return release


_GIT_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*\+g([0-9a-f]{7,40})(?:\.dirty)?$")
_PLAIN_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_IMAGE_TAG = re.compile(r"^(release|nightly|weekly)-([0-9]{4})-([0-9]{2})-([0-9]{2})$")
_UNDATED_REVISION = re.compile(r"^release-[0-9]+\.[0-9]+$")


def resolve_upstream(spec: str, catalogue: Catalogue | None = None) -> StackResolution | None:
    """Map an upstream torch-spyre version string to the release that covers it, or return
    ``None`` when ``spec`` is not one (a release name or a file path).

    Accepted: ``0.0.1+g8068434`` (``torch_spyre.__version__`` since upstream PR #4120: the
    commit must be one the catalogue lists in a release's ``upstream.commits``) and dated CI
    image tags ``release-YYYY-MM-DD`` / ``nightly-YYYY-MM-DD`` / ``weekly-YYYY-MM-DD`` (the
    release whose upstream range contains the date; a date after the newest range resolves
    to the newest release, marked inexact). Other upstream forms (a bare ``0.0.1``, an
    unknown commit, an undated ``release-0.5``) raise :class:`SpyreSimError` saying why.
    """
    cat = catalogue if catalogue is not None else builtin_catalogue()
    git = _GIT_VERSION.match(spec)
    if git is not None:
        sha = git.group(1)
        found = cat.commit(sha)
        if found is None:
            known = ", ".join(
                f"{c.sha} ({r.name})"
                for r in cat.releases
                if r.upstream is not None
                for c in r.upstream.commits
            )
            raise SpyreSimError(
                f"upstream version {spec!r}: commit {sha} is not one the stack catalogue "
                f"knows (known commits: {known or 'none'}); give a dated image tag such as "
                "release-2026-09-22, or a release name: " + ", ".join(cat.names)
            )
        release, commit = found
        return _resolution(spec, "commit", commit.date, release, True, f"commit {commit.sha}")
    image = _IMAGE_TAG.match(spec)
    if image is not None:
        try:
            day = _dt.date(int(image.group(2)), int(image.group(3)), int(image.group(4)))
        except ValueError:
            raise SpyreSimError(f"image tag {spec!r} does not carry a valid date") from None
        covering = cat.covering(day)
        if covering is not None:
            return _resolution(spec, "image", day, covering, True, f"{image.group(1)} image")
        dated = [(r, r.upstream) for r in cat.releases if r.upstream is not None]
        if dated and day > dated[-1][1].end:
            return _resolution(spec, "image", day, dated[-1][0], False, f"{image.group(1)} image")
        first = dated[0][1].start.isoformat() if dated else "?"
        raise SpyreSimError(
            f"image tag {spec!r} predates every modelled upstream state (the first starts on "
            f"{first}); choose a release: " + ", ".join(cat.names)
        )
    if _UNDATED_REVISION.match(spec) and spec not in cat:
        raise SpyreSimError(
            f"upstream revision {spec!r} carries no date the catalogue can place; give a "
            "commit version (0.0.1+g<sha>), a dated image tag (release-2026-09-22) or a "
            "release name: " + ", ".join(cat.names)
        )
    if _PLAIN_VERSION.match(spec) and spec not in cat:
        raise SpyreSimError(
            f"upstream version {spec!r} names no commit (torch-spyre reports the same version "
            "for every build without a +g<sha> suffix); give torch_spyre.__version__ of a "
            "build that has one (0.0.1+g<sha>), a dated image tag, or a release name: "
            + ", ".join(cat.names)
        )
    return None


def _resolution(
    spec: str, kind: str, day: _dt.date, release: Release, exact: bool, what: str
) -> StackResolution:
    upstream = release.upstream
    assert upstream is not None
    text = (
        f"upstream {what} {spec!r} ({day.isoformat()}) resolved to stack release "
        f"{release.name} (upstream state {upstream.start.isoformat()}..{upstream.end.isoformat()})"
    )
    if not exact:
        text += (
            "; the date is after every modelled upstream state, so the newest release is "
            "used and later upstream changes are not modelled"
        )
    return StackResolution(spec, kind, day, release, exact, text)


def resolve_stack(spec: str | os.PathLike[str] | Release) -> Release:
    """A :class:`Release` from a built-in name (``"2026.05"``), an upstream version string
    (``"0.0.1+g8068434"``, ``"release-2026-09-22"``: see :func:`resolve_upstream`; a
    :class:`~spyre_sim.errors.SpyreStackResolutionWarning` says which release it became,
    once per string and process), the path of a user release TOML file (which extends a
    built-in one), or a :class:`Release` (returned as is)."""
    if isinstance(spec, Release):
        return spec
    catalogue = builtin_catalogue()
    if isinstance(spec, str) and not _looks_like_path(spec) and spec not in catalogue:
        resolution = resolve_upstream(spec, catalogue)
        if resolution is not None:
            _warn_resolution(resolution)
            return resolution.release
    if isinstance(spec, str) and not _looks_like_path(spec):
        try:
            return catalogue.release(spec)
        except SpyreSimError:
            if not os.path.isfile(spec):
                raise
    return _load_user_release_cached(os.fspath(spec))


def _warn_resolution(resolution: StackResolution) -> None:
    if resolution.spec in device_state.warned_resolutions:
        return
    device_state.warned_resolutions.add(resolution.spec)
    # attribute the warning to the caller's line, outside this package
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(resolution.message, SpyreStackResolutionWarning, stacklevel=level)


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or os.sep in spec


def _load_user_release_cached(source: str) -> Release:
    try:
        stat = os.stat(source)
    except OSError:
        return load_release_file(source)
    key = (os.path.abspath(source), stat.st_mtime_ns, stat.st_size)
    cached = device_state.user_releases.get(key)
    if cached is None:
        cached = load_release_file(source)
        device_state.user_releases[key] = cached
    return cached


# --------------------------------------------------------------------------- parsing


_TOP_RELEASE_KEYS = frozenset({"schema_version", "release", "gaps", "ops"})
_TOP_GAPS_FILE_KEYS = frozenset({"schema_version", "gaps"})
_RELEASE_KEYS = frozenset({"name", "base", "date", "summary", "upstream"})
_RULE_KEYS = frozenset({"decision", "gap", "note", "source"})
_GAP_STATE_KEYS = frozenset({"state", "source", "note"})
_UPSTREAM_KEYS = frozenset({"from", "to", "commits", "sources"})
_COMMIT_KEYS = frozenset({"sha", "date", "source"})
#: keys a version-1 file may not use (``<table>.<key>``)
_V2_ONLY = "needs schema_version = 2 (the provenance keys are new in version 2)"
_SOURCE = re.compile(
    r"^(?:(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[0-9]+|docs/[A-Za-z0-9_./-]+\.md §[0-9]+(?:\.[0-9]+)*)$"
)
_SOURCE_FORMS = (
    'a source is "#1234" (a torch-spyre PR or issue), "owner/repo#12" (another repository) '
    'or "docs/STACK.md §5" (a section of this project\'s stack description)'
)
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_GAP_DEF_KEYS = frozenset({"title", "nature", "ops", "description"})
_OP_KEY = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_GAP_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_GAPS_FILE = "gaps.toml"


def _show(value: object) -> str:
    """A value as it would be written in TOML (strings double-quoted)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_show(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, _dt.date):
        return value.isoformat()
    return repr(value)


def _show_rule(rule: OpRule, as_table: bool) -> str:
    if not as_table:
        return _show(rule.decision.value)
    fields: dict[str, str] = {"decision": rule.decision.value}
    if rule.gap is not None:
        fields["gap"] = rule.gap
    if rule.note:
        fields["note"] = rule.note
    return _show(fields)


def _packet_of(key: str) -> str:
    parts = key.split(".")
    return ".".join(parts[:2])


@dataclass
class _Delta:
    """One release file as written: its own changes only."""

    source: str
    name: str
    version: Version | None
    base: str | None
    date: _dt.date | None
    summary: str
    gap_states: dict[str, GapState]
    op_rules: dict[str, OpRule]
    rule_is_table: dict[str, bool]
    upstream: Upstream | None = None
    gap_sources: dict[str, tuple[str, ...]] | None = None
    gap_notes: dict[str, str] | None = None


class _Reader:
    """Parses one file, collecting problems instead of stopping at the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []
        self.version = SCHEMA_VERSION

    def problem(self, key: str, what: str, got: object) -> None:
        self.problems.append(f"{self.source}: {key}: {what} (got {_show(got)})")

    def _toml(self, raw: bytes) -> dict[str, Any] | None:
        try:
            return tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            self.problem("<file>", "not UTF-8 text", str(exc))
        except tomllib.TOMLDecodeError as exc:
            self.problem("<file>", "not valid TOML", str(exc))
        return None

    def _schema(self, doc: Mapping[str, Any], versions: Iterable[int] = SCHEMA_VERSIONS) -> int:
        """The file's schema version (the newest one when it is missing or unsupported, so
        that the rest of the file is still checked)."""
        allowed = tuple(versions)
        version = doc.get("schema_version")
        if "schema_version" not in doc:
            self.problems.append(
                f"{self.source}: schema_version: missing; write "
                f"schema_version = {allowed[-1]} (got nothing)"
            )
        elif type(version) is not int or version not in allowed:
            self.problem(
                "schema_version",
                "unsupported schema version; this loader reads "
                + " and ".join(str(v) for v in allowed),
                version,
            )
        else:
            return version
        return allowed[-1]

    def _sources(self, key: str, value: object) -> tuple[str, ...]:
        """A ``source`` value: one reference or a list of them, each in a known form."""
        items = value if isinstance(value, list) else [value]
        if not items or not isinstance(value, (str, list)):
            self.problem(key, f"must be a string or a list of strings; {_SOURCE_FORMS}", value)
            return ()
        found: list[str] = []
        for item in items:
            if not isinstance(item, str) or not _SOURCE.match(item):
                self.problem(key, f"not a source; {_SOURCE_FORMS}", item)
            else:
                found.append(item)
        return tuple(found)

    def _day(self, key: str, value: object, *, required: bool = True) -> _dt.date | None:
        if value is None:
            if required:
                self.problems.append(f"{self.source}: {key}: missing (got nothing)")
            return None
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date | str):
            self.problem(key, "must be a date such as 2026-05-29", value)
            return None
        if isinstance(value, str):
            try:
                return _dt.date.fromisoformat(value)
            except ValueError:
                self.problem(key, "not a date; write YYYY-MM-DD", value)
                return None
        return value

    def _upstream(self, value: object, end: _dt.date | None) -> Upstream | None:
        key = "release.upstream"
        table = self._table(key, value)
        if table is None:
            return None
        self._unknown_keys(key, table, _UPSTREAM_KEYS)
        start = self._day(f"{key}.from", table.get("from"))
        stop = self._day(f"{key}.to", table.get("to"))
        sources = self._sources(f"{key}.sources", table["sources"]) if "sources" in table else ()
        if start is not None and stop is not None and start > stop:
            self.problem(f"{key}.from", f"the range must not end before it starts ({stop})", start)
        if stop is not None and end is not None and stop != end:
            self.problem(
                f"{key}.to",
                f"the upstream range ends on the release date ({end.isoformat()})",
                stop,
            )
        commits: list[UpstreamCommit] = []
        raw = table.get("commits", [])
        if not isinstance(raw, list):
            self.problem(f"{key}.commits", "must be a list of {sha, date, source} tables", raw)
            raw = []
        for index, body in enumerate(raw):
            ckey = f"{key}.commits[{index}]"
            if not isinstance(body, dict):
                self.problem(ckey, "must be a table {sha, date, source}", body)
                continue
            self._unknown_keys(ckey, body, _COMMIT_KEYS)
            sha = self._string(f"{ckey}.sha", body.get("sha"))
            if sha is not None and not _SHA.match(sha):
                self.problem(f"{ckey}.sha", "a commit is 7 to 40 lower-case hex digits", sha)
                sha = None
            day = self._day(f"{ckey}.date", body.get("date"))
            if "source" not in body:
                self.problems.append(
                    f"{self.source}: {ckey}.source: missing; say where the commit was seen "
                    "(got nothing)"
                )
                csources: tuple[str, ...] = ()
            else:
                csources = self._sources(f"{ckey}.source", body["source"])
            if (
                day is not None
                and start is not None
                and stop is not None
                and not start <= day <= stop
            ):
                self.problem(
                    f"{ckey}.date",
                    f"the commit lies outside the upstream range {start}..{stop}",
                    day,
                )
            if sha is not None and day is not None and csources:
                commits.append(UpstreamCommit(sha, day, csources))
        if start is None or stop is None:
            return None
        return Upstream(start, stop, tuple(commits), sources)

    def _unknown_keys(self, prefix: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
        for key in table:
            if key not in allowed:
                where = f"{prefix}.{key}" if prefix else key
                self.problem(
                    where, f"unknown key; allowed: {', '.join(sorted(allowed))}", table[key]
                )

    def _string(self, key: str, value: object, *, required: bool = True) -> str | None:
        if value is None:
            if required:
                self.problems.append(f"{self.source}: {key}: missing (got nothing)")
            return None
        if not isinstance(value, str):
            self.problem(key, "must be a string", value)
            return None
        if required and not value.strip():
            self.problem(key, "must not be empty", value)
            return None
        return value

    def _table(self, key: str, value: object) -> Mapping[str, Any] | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(key, "must be a table", value)
            return None
        return value

    # ------------------------------------------------------------------ gaps file

    def gaps_file(self, raw: bytes) -> dict[str, Gap]:
        doc = self._toml(raw)
        if doc is None:
            return {}
        self._schema(doc, versions=(1,))
        self._unknown_keys("", doc, _TOP_GAPS_FILE_KEYS)
        table = self._table("gaps", doc.get("gaps"))
        gaps: dict[str, Gap] = {}
        for gap_id, body in (table or {}).items():
            key = f"gaps.{gap_id}"
            if not _GAP_ID.match(gap_id):
                self.problem(key, "a gap id is lower-case words joined by '-'", gap_id)
                continue
            if not isinstance(body, dict):
                self.problem(key, "must be a table with title, nature, ops, description", body)
                continue
            self._unknown_keys(key, body, _GAP_DEF_KEYS)
            title = self._string(f"{key}.title", body.get("title"))
            description = self._string(f"{key}.description", body.get("description"))
            nature_raw = self._string(f"{key}.nature", body.get("nature"))
            nature: GapNature | None = None
            if nature_raw is not None:
                try:
                    nature = GapNature(nature_raw)
                except ValueError:
                    self.problem(
                        f"{key}.nature",
                        f"unknown nature; one of {', '.join(n.value for n in GapNature)}",
                        nature_raw,
                    )
            ops_raw = body.get("ops", [])
            ops: list[str] = []
            if not isinstance(ops_raw, list):
                self.problem(f"{key}.ops", "must be a list of ATen packet names", ops_raw)
            else:
                for op in ops_raw:
                    if not isinstance(op, str) or not _OP_KEY.match(op):
                        self.problem(f"{key}.ops", 'not an ATen op name like "aten.sin"', op)
                    else:
                        ops.append(op)
            if title is not None and description is not None and nature is not None:
                gaps[gap_id] = Gap(gap_id, title, nature, tuple(ops), description)
        if table is not None and UNLOWERED_GAP not in table:
            self.problems.append(
                f"{self.source}: gaps: the catch-all gap {_show(UNLOWERED_GAP)} must be defined "
                "(got nothing)"
            )
        return gaps

    # ------------------------------------------------------------------ release files

    def release_file(self, raw: bytes) -> _Delta | None:
        doc = self._toml(raw)
        if doc is None:
            return None
        self.version = self._schema(doc)
        self._unknown_keys("", doc, _TOP_RELEASE_KEYS)
        head = self._table("release", doc.get("release"))
        if "release" not in doc:
            self.problems.append(
                f"{self.source}: release: missing [release] table with name, base, date, "
                "summary (got nothing)"
            )
            head = None
        if head is not None:
            self._unknown_keys("release", head, _RELEASE_KEYS)
            name = self._string("release.name", head.get("name")) or ""
            version: Version | None = None
            if name:
                try:
                    version = Version(name)
                except InvalidVersion:
                    self.problem(
                        "release.name", 'a release name must be a version such as "2026.11"', name
                    )
            base = self._string("release.base", head.get("base"), required=False)
            summary = self._string("release.summary", head.get("summary")) or ""
            date = self._date(head.get("date"))
            upstream: Upstream | None = None
            if "upstream" in head:
                if self.version < 2:
                    self.problem("release.upstream", _V2_ONLY, head["upstream"])
                else:
                    upstream = self._upstream(head["upstream"], date)
        # The gap and op tables are checked even when the head is broken: all problems at once.
        gap_states, gap_sources, gap_notes = self._gap_states(doc.get("gaps"))
        rules, is_table = self._op_rules(doc.get("ops"))
        if head is None:
            return None
        return _Delta(
            self.source,
            name,
            version,
            base,
            date,
            summary,
            gap_states,
            rules,
            is_table,
            upstream,
            gap_sources,
            gap_notes,
        )

    def _date(self, value: object) -> _dt.date | None:
        return self._day("release.date", value)

    def _gap_states(
        self, value: object
    ) -> tuple[dict[str, GapState], dict[str, tuple[str, ...]], dict[str, str]]:
        table = self._table("gaps", value)
        states: dict[str, GapState] = {}
        sources: dict[str, tuple[str, ...]] = {}
        notes: dict[str, str] = {}
        for gap_id, body in (table or {}).items():
            key = f"gaps.{gap_id}"
            state_raw: object = body
            if isinstance(body, dict):
                if self.version < 2:
                    self.problem(
                        key, "a gap state must be a string; the table form " + _V2_ONLY, body
                    )
                    continue
                self._unknown_keys(key, body, _GAP_STATE_KEYS)
                state_raw = body.get("state")
                if state_raw is None:
                    self.problems.append(f"{self.source}: {key}.state: missing (got nothing)")
                    continue
                if "source" in body:
                    sources[gap_id] = self._sources(f"{key}.source", body["source"])
                note = body.get("note", "")
                if not isinstance(note, str):
                    self.problem(f"{key}.note", "must be a string", note)
                else:
                    notes[gap_id] = note
                key = f"{key}.state"
            if not isinstance(state_raw, str):
                self.problem(key, "a gap state must be a string", state_raw)
                continue
            try:
                states[gap_id] = GapState(state_raw)
            except ValueError:
                self.problem(
                    key,
                    f"unknown gap state; one of {', '.join(s.value for s in GapState)}",
                    state_raw,
                )
        return states, sources, notes

    def _op_rules(self, value: object) -> tuple[dict[str, OpRule], dict[str, bool]]:
        table = self._table("ops", value)
        rules: dict[str, OpRule] = {}
        is_table: dict[str, bool] = {}
        for op, body in (table or {}).items():
            key = f"ops.{_show(op)}"
            if not _OP_KEY.match(op):
                self.problem(key, 'not an ATen op name like "aten.sin" or "aten.add.Tensor"', op)
                continue
            rule = self._rule(key, body)
            if rule is not None:
                rules[op] = rule
                is_table[op] = isinstance(body, dict)
        return rules, is_table

    def _rule(self, key: str, body: object) -> OpRule | None:
        if isinstance(body, str):
            decision = self._decision(key, body)
            if decision is None:
                return None
            if decision not in _LOWERED:
                self.problem(
                    key,
                    f"decision {_show(decision.value)} must name the gap it belongs to; write "
                    f'{{decision = "{decision.value}", gap = "...", note = "..."}}',
                    body,
                )
                return None
            return OpRule(decision, None, "")
        if not isinstance(body, dict):
            self.problem(key, "an op rule is a decision string or a table", body)
            return None
        self._unknown_keys(key, body, _RULE_KEYS)
        source: tuple[str, ...] = ()
        if "source" in body:
            if self.version < 2:
                self.problem(f"{key}.source", _V2_ONLY, body["source"])
            else:
                source = self._sources(f"{key}.source", body["source"])
        decision_raw = body.get("decision")
        if decision_raw is None:
            self.problems.append(f"{self.source}: {key}.decision: missing (got nothing)")
            return None
        if not isinstance(decision_raw, str):
            self.problem(f"{key}.decision", "must be a string", decision_raw)
            return None
        decision = self._decision(f"{key}.decision", decision_raw)
        gap = body.get("gap")
        note = body.get("note", "")
        ok = decision is not None
        if gap is not None and not isinstance(gap, str):
            self.problem(f"{key}.gap", "must be a string", gap)
            ok = False
        if not isinstance(note, str):
            self.problem(f"{key}.note", "must be a string", note)
            ok = False
        if decision is not None and decision not in _LOWERED and gap is None:
            self.problem(
                key, f'decision {_show(decision.value)} names no gap; add gap = "<gap id>"', body
            )
            ok = False
        if decision in _LOWERED and gap is not None:
            self.problem(
                f"{key}.gap",
                f"a {decision.value if decision else ''} op lowers, so it names no gap; remove gap",
                gap,
            )
            ok = False
        if not ok or decision is None:
            return None
        assert isinstance(note, str)
        return OpRule(decision, gap if isinstance(gap, str) else None, note, source)

    def _decision(self, key: str, raw: str) -> Decision | None:
        try:
            return Decision(raw)
        except ValueError:
            self.problem(
                key, f"unknown decision; one of {', '.join(d.value for d in Decision)}", raw
            )
            return None


# --------------------------------------------------------------------------- building


def _unknown_gap(gap_id: str, gaps: Mapping[str, Gap]) -> str:
    close = difflib.get_close_matches(gap_id, list(gaps), n=1)
    hint = f" (did you mean {_show(close[0])}?)" if close else ""
    return f"unknown gap id{hint}; known gaps: {', '.join(sorted(gaps)) or '(none)'}"


def _check_gap_refs(delta: _Delta, gaps: Mapping[str, Gap], problems: list[str]) -> None:
    """Gap ids exist; lasting gaps are never closed."""
    for gap_id, state in delta.gap_states.items():
        gap = gaps.get(gap_id)
        if gap is None:
            problems.append(
                f"{delta.source}: gaps.{gap_id}: {_unknown_gap(gap_id, gaps)} (got {_show(gap_id)})"
            )
        elif gap.lasting and state is GapState.CLOSED:
            problems.append(
                f"{delta.source}: gaps.{gap_id}: a lasting gap is never closed "
                f"(got {_show(state.value)})"
            )
    for op, rule in delta.op_rules.items():
        if rule.gap is not None and rule.gap not in gaps:
            problems.append(
                f"{delta.source}: ops.{_show(op)}.gap: {_unknown_gap(rule.gap, gaps)} "
                f"(got {_show(rule.gap)})"
            )


def _merge(delta: _Delta, base: Release | None) -> Release:
    assert delta.version is not None
    assert delta.date is not None
    states = dict(base.gap_states) if base is not None else {}
    states.update(delta.gap_states)
    rules = dict(base.op_rules) if base is not None else {}
    rules.update(delta.op_rules)
    # a line replaces the state of its gap as a whole, with its own source and note
    sources = dict(base.gap_sources) if base is not None else {}
    notes = dict(base.gap_notes) if base is not None else {}
    own_sources, own_notes = delta.gap_sources or {}, delta.gap_notes or {}
    for gap_id in delta.gap_states:
        sources[gap_id] = own_sources.get(gap_id, ())
        notes[gap_id] = own_notes.get(gap_id, "")
    return Release(
        name=delta.name,
        version=delta.version,
        base=delta.base,
        date=delta.date,
        summary=delta.summary,
        source=delta.source,
        gap_states=MappingProxyType(states),
        op_rules=MappingProxyType(rules),
        upstream=delta.upstream,
        gap_sources=MappingProxyType(sources),
        gap_notes=MappingProxyType(notes),
        own_gaps=frozenset(delta.gap_states),
        own_ops=frozenset(delta.op_rules),
    )


def _check_upstream_order(
    delta: _Delta, base_name: str, base_upstream: Upstream | None, problems: list[str]
) -> None:
    """A release's upstream range starts after its base's range ends."""
    if delta.upstream is None or base_upstream is None:
        return
    if delta.upstream.start <= base_upstream.end:
        problems.append(
            f"{delta.source}: release.upstream.from: the range must start after the range of "
            f"its base {base_name} ({base_upstream.start}..{base_upstream.end}) "
            f"(got {_show(delta.upstream.start)})"
        )


def _check_commits_unique(deltas: Iterable[_Delta], problems: list[str]) -> None:
    """A commit belongs to one release: no sha is a prefix of a sha listed elsewhere."""
    seen: list[tuple[str, str]] = []
    for delta in deltas:
        if delta.upstream is None:
            continue
        for commit in delta.upstream.commits:
            for sha, where in seen:
                if sha.startswith(commit.sha) or commit.sha.startswith(sha):
                    problems.append(
                        f"{delta.source}: release.upstream.commits: commit {commit.sha} is "
                        f"also listed in {where} (got {_show(commit.sha)})"
                    )
            seen.append((commit.sha, delta.source))


def _check_consistency(release: Release, problems: list[str]) -> None:
    """An op that does not lower cannot name a gap that is closed at the same release."""
    for op, rule in release.op_rules.items():
        if rule.gap is None:
            continue
        state = release.gap_states.get(rule.gap)
        if state is GapState.CLOSED:
            problems.append(
                f"{release.source}: ops.{_show(op)}: decision {_show(rule.decision.value)} names gap "
                f"{_show(rule.gap)}, which is closed at {release.name}; update the op or the gap "
                f"state (got {_show(rule.decision.value)})"
            )


def _load_catalogue(files: list[tuple[str, bytes]]) -> Catalogue:
    problems: list[str] = []
    gaps: dict[str, Gap] = {}
    deltas: list[_Delta] = []
    gaps_seen = False
    for source, raw in files:
        reader = _Reader(source)
        if Path(source).name == _GAPS_FILE:
            gaps_seen = True
            gaps = reader.gaps_file(raw)
        else:
            delta = reader.release_file(raw)
            if delta is not None:
                deltas.append(delta)
        problems.extend(reader.problems)
    if not gaps_seen:
        problems.append(f"{_GAPS_FILE}: <file>: the catalogue has no gaps file (got nothing)")
    if not deltas and not problems:
        problems.append("<catalogue>: <files>: no release files (got nothing)")

    by_name: dict[str, _Delta] = {}
    for delta in deltas:
        _check_gap_refs(delta, gaps, problems)
        if not delta.name:
            continue
        clash = by_name.get(delta.name) or next(
            (
                d
                for d in by_name.values()
                if delta.version is not None and d.version == delta.version
            ),
            None,
        )
        if clash is not None:
            problems.append(
                f"{delta.source}: release.name: duplicate release name, also in {clash.source} "
                f"(got {_show(delta.name)})"
            )
            continue
        by_name[delta.name] = delta

    roots = [d for d in by_name.values() if d.base is None]
    if by_name and len(roots) != 1:
        problems.append(
            "<catalogue>: release.base: exactly one release (the first) has no base "
            f"(got {_show([d.name for d in roots])})"
        )
    for delta in by_name.values():
        if delta.base is None:
            missing = sorted(set(gaps) - set(delta.gap_states))
            if missing:
                problems.append(
                    f"{delta.source}: gaps: the first release must give the state of every "
                    f"gap; missing: {', '.join(missing)} (got {_show(sorted(delta.gap_states))})"
                )
            continue
        base = by_name.get(delta.base)
        if base is None:
            problems.append(
                f"{delta.source}: release.base: unknown base release; valid releases: "
                f"{', '.join(sorted(by_name))} (got {_show(delta.base)})"
            )
        elif (
            delta.version is not None
            and base.version is not None
            and not delta.version > base.version
        ):
            problems.append(
                f"{delta.source}: release.name: a release must sort after its base "
                f"{base.name} (got {_show(delta.name)})"
            )
        if base is not None and delta.date and base.date and delta.date < base.date:
            problems.append(
                f"{delta.source}: release.date: a release cannot predate its base {base.name} "
                f"({base.date.isoformat()}) (got {_show(delta.date)})"
            )
        if base is not None:
            _check_upstream_order(delta, base.name, base.upstream, problems)
    _check_commits_unique(by_name.values(), problems)

    # Cycles: follow base links; a walk that comes back to its start is a cycle.
    reported: set[str] = set()
    for start in by_name.values():
        path = [start.name]
        current = start
        while current.base is not None and current.base in by_name:
            if current.base == start.name:
                cycle = frozenset(path)
                if not reported & cycle:
                    reported |= cycle
                    chain = " -> ".join([*path, start.name])
                    problems.append(
                        f"{start.source}: release.base: releases extend each other in a cycle "
                        f"{chain} (got {_show(start.base)})"
                    )
                break
            if current.base in path:
                break
            current = by_name[current.base]
            path.append(current.name)

    if problems:
        raise CatalogueError(problems)

    built: dict[str, Release] = {}

    def build(delta: _Delta) -> Release:
        done = built.get(delta.name)
        if done is None:
            base = build(by_name[delta.base]) if delta.base is not None else None
            done = _merge(delta, base)
            built[delta.name] = done
        return done

    for delta in by_name.values():
        build(delta)
    for release in sorted(built.values(), key=lambda r: r.version):
        _check_consistency(release, problems)
    if problems:
        raise CatalogueError(problems)
    return Catalogue(built.values(), gaps)
