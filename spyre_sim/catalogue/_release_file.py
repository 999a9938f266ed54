"""Reading one release file (a delta on its base), every problem collected.

:class:`_ReleaseFileReader` turns the bytes of a release file into a :class:`_Delta` (the file
as written: its own changes only): the ``[release]`` head (name, base, date, summary, the
upstream range and commits of schema 2), the gap states and the op rules, checking types, keys,
dates, evidence sources and what schema version 1 may not use. Merging deltas is
:mod:`spyre_sim.catalogue._loading`'s.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from spyre_sim.catalogue._model import (
    _LOWERED,
    Decision,
    GapState,
    OpRule,
    Upstream,
    UpstreamCommit,
)
from spyre_sim.catalogue._reader import _OP_KEY, _Reader, _show
from spyre_sim.problems import Problem

_TOP_RELEASE_KEYS = frozenset({"schema_version", "release", "gaps", "ops"})


_RELEASE_KEYS = frozenset({"name", "base", "date", "summary", "upstream"})


_RULE_KEYS = frozenset({"decision", "gap", "note", "source"})


_GAP_STATE_KEYS = frozenset({"state", "source", "note"})


_UPSTREAM_KEYS = frozenset({"from", "to", "commits", "sources"})


_COMMIT_KEYS = frozenset({"sha", "date", "source"})


#: keys a version-1 file may not use (``<table>.<key>``)
_V2_ONLY = "needs schema_version = 2 (the provenance keys are new in version 2)"


_SHA = re.compile(r"^[0-9a-f]{7,40}$")


def _show_rule(rule: OpRule, as_table: bool) -> str:
    if not as_table:
        return _show(rule.decision.value)
    fields: dict[str, str] = {"decision": rule.decision.value}
    if rule.gap is not None:
        fields["gap"] = rule.gap
    if rule.note:
        fields["note"] = rule.note
    return _show(fields)


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


class _ReleaseFileReader(_Reader):
    """Parses one release file, collecting problems instead of stopping at the first."""

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
