"""The stack-release catalogue: which ATen ops a Spyre stack release lowers, and the state of
every gap at that release.

The catalogue is data (``spyre_sim/data/*.toml``, format in ``spyre_sim/data/README.md``),
parsed here into frozen dataclasses. Every release is a delta on its ``base``; loading merges
the deltas so that each :class:`Release` carries the full picture (every gap's state, every op
rule). Validation reports every problem of every file at once in one :class:`CatalogueError`.

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from spyre_sim.errors import CatalogueError, SpyreSimError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "SCHEMA_VERSION",
    "UNLOWERED_GAP",
    "Catalogue",
    "Decision",
    "Gap",
    "GapNature",
    "GapState",
    "OpRule",
    "Release",
    "builtin_catalogue",
    "catalogue_for",
    "load_release_file",
    "resolve_stack",
]

#: The only ``schema_version`` this loader understands (gaps file and release files).
SCHEMA_VERSION = 1

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
    """What the stack does with one ATen op (SPYRE.md section 4)."""

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
    """A gap between what models do and what the stack lowers (SPYRE.md section 6)."""

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
    ``native``/``decomposed``; ``note`` says why when the reference is silent."""

    decision: Decision
    gap: str | None
    note: str = ""


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
    extended = _EXTENDED.get(release)
    if extended is None:
        others = (r for r in builtin.releases if r.version != release.version)
        extended = Catalogue((*others, release), builtin.gaps)
        _EXTENDED[release] = extended
    return extended


_EXTENDED: dict[Release, Catalogue] = {}


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


def resolve_stack(spec: str | os.PathLike[str] | Release) -> Release:
    """A :class:`Release` from a built-in name (``"2026.05"``), the path of a user release
    TOML file (which extends a built-in one), or a :class:`Release` (returned as is)."""
    if isinstance(spec, Release):
        return spec
    catalogue = builtin_catalogue()
    if isinstance(spec, str) and not _looks_like_path(spec):
        try:
            return catalogue.release(spec)
        except SpyreSimError:
            if not os.path.isfile(spec):
                raise
    return _load_user_release_cached(os.fspath(spec))


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or os.sep in spec


def _load_user_release_cached(source: str) -> Release:
    try:
        stat = os.stat(source)
    except OSError:
        return load_release_file(source)
    key = (os.path.abspath(source), stat.st_mtime_ns, stat.st_size)
    cached = _USER_RELEASES.get(key)
    if cached is None:
        cached = load_release_file(source)
        _USER_RELEASES[key] = cached
    return cached


_USER_RELEASES: dict[tuple[str, int, int], Release] = {}


# --------------------------------------------------------------------------- parsing


_TOP_RELEASE_KEYS = frozenset({"schema_version", "release", "gaps", "ops"})
_TOP_GAPS_FILE_KEYS = frozenset({"schema_version", "gaps"})
_RELEASE_KEYS = frozenset({"name", "base", "date", "summary"})
_RULE_KEYS = frozenset({"decision", "gap", "note"})
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


class _Reader:
    """Parses one file, collecting problems instead of stopping at the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

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

    def _schema(self, doc: Mapping[str, Any]) -> None:
        version = doc.get("schema_version")
        if "schema_version" not in doc:
            self.problems.append(
                f"{self.source}: schema_version: missing; write "
                f"schema_version = {SCHEMA_VERSION} (got nothing)"
            )
        elif type(version) is not int or version != SCHEMA_VERSION:
            self.problem(
                "schema_version",
                f"unsupported schema version; this loader reads {SCHEMA_VERSION}",
                version,
            )

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
        self._schema(doc)
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
        self._schema(doc)
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
        # The gap and op tables are checked even when the head is broken: all problems at once.
        gap_states = self._gap_states(doc.get("gaps"))
        rules, is_table = self._op_rules(doc.get("ops"))
        if head is None:
            return None
        return _Delta(self.source, name, version, base, date, summary, gap_states, rules, is_table)

    def _date(self, value: object) -> _dt.date | None:
        key = "release.date"
        if value is None:
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

    def _gap_states(self, value: object) -> dict[str, GapState]:
        table = self._table("gaps", value)
        states: dict[str, GapState] = {}
        for gap_id, state_raw in (table or {}).items():
            key = f"gaps.{gap_id}"
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
        return states

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
        return OpRule(decision, gap if isinstance(gap, str) else None, note)

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
    return Release(
        name=delta.name,
        version=delta.version,
        base=delta.base,
        date=delta.date,
        summary=delta.summary,
        source=delta.source,
        gap_states=MappingProxyType(states),
        op_rules=MappingProxyType(rules),
    )


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
