"""Reading one catalogue TOML file (a release delta or ``gaps.toml``), every problem collected.

:class:`_Reader` turns the bytes of one file into a :class:`_Delta` (a release file as written:
its own changes only) or the gap table, checking types, keys, dates, sources and schema
version, and collects every problem with its key path instead of stopping at the first.
Problems are :class:`~spyre_sim.problems.Problem` values; cross-file checks (bases, gap
references, merging) are :mod:`spyre_sim.catalogue._loading`'s.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from spyre_sim.catalogue._model import (
    _LOWERED,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    UNLOWERED_GAP,
    Decision,
    Gap,
    GapNature,
    GapState,
    OpRule,
    Upstream,
    UpstreamCommit,
)
from spyre_sim.problems import Problem, read_toml

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
        self.problems: list[Problem] = []
        self.version = SCHEMA_VERSION

    def problem(self, key: str, what: str, got: object) -> None:
        self.problems.append(Problem(self.source, key, f"{what} (got {_show(got)})"))

    def _toml(self, raw: bytes) -> dict[str, Any] | None:
        doc, problems = read_toml(raw, self.source)
        self.problems.extend(problems)
        return doc

    def _schema(self, doc: Mapping[str, Any], versions: Iterable[int] = SCHEMA_VERSIONS) -> int:
        """The file's schema version (the newest one when it is missing or unsupported, so
        that the rest of the file is still checked)."""
        allowed = tuple(versions)
        version = doc.get("schema_version")
        if "schema_version" not in doc:
            self.problems.append(
                Problem(
                    self.source,
                    "schema_version",
                    f"missing; write schema_version = {allowed[-1]} (got nothing)",
                )
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
                self.problems.append(Problem(self.source, f"{key}", "missing (got nothing)"))
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
                    Problem(
                        self.source,
                        f"{ckey}.source",
                        "missing; say where the commit was seen (got nothing)",
                    )
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
                self.problems.append(Problem(self.source, f"{key}", "missing (got nothing)"))
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
                Problem(
                    self.source,
                    "gaps",
                    f"the catch-all gap {_show(UNLOWERED_GAP)} must be defined (got nothing)",
                )
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
                Problem(
                    self.source,
                    "release",
                    "missing [release] table with name, base, date, summary (got nothing)",
                )
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
                    self.problems.append(
                        Problem(self.source, f"{key}.state", "missing (got nothing)")
                    )
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
            self.problems.append(Problem(self.source, f"{key}.decision", "missing (got nothing)"))
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
