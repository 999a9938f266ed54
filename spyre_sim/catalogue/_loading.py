"""Loading the catalogue: the built-in release files, a directory of them, a user release.

Every release file is a delta on its ``base``; loading reads each file
(:mod:`spyre_sim.catalogue._gaps_file`, :mod:`spyre_sim.catalogue._release_file`), checks what spans files (one root release, known bases,
no cycles, upstream ranges in order, commits listed once, gap references), and merges the
deltas so that each :class:`~spyre_sim.catalogue.Release` carries the full picture. Every
problem of every file is reported at once in one :class:`~spyre_sim.errors.CatalogueError`.
The built-in catalogue is parsed once per process (:func:`builtin_catalogue` is cached).
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from spyre_sim.catalogue._catalogue import Catalogue
from spyre_sim.catalogue._gaps_file import _GAPS_FILE, _GapsFileReader
from spyre_sim.catalogue._model import Gap, GapState, Release, Upstream, packet_of
from spyre_sim.catalogue._reader import _show
from spyre_sim.catalogue._release_file import _Delta, _ReleaseFileReader, _show_rule
from spyre_sim.errors import CatalogueError
from spyre_sim.problems import Problem
from spyre_sim.state import device_state


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
        raise CatalogueError([Problem(source, "", f"cannot be read: {exc}")]) from None
    reader = _ReleaseFileReader(source)
    delta = reader.release_file(raw)
    if delta is None:
        raise CatalogueError(reader.problems)
    problems = reader.problems
    if delta.name in catalogue or any(r.version == delta.version for r in catalogue):
        problems.append(
            Problem(
                source,
                "release.name",
                f"a release with this name already exists in the catalogue "
                f"({', '.join(catalogue.names)}); choose a new name (got {_show(delta.name)})",
            )
        )
    base: Release | None = None
    if delta.base is None:
        problems.append(
            Problem(
                source,
                "release.base",
                f"a user release must extend a release of the catalogue "
                f"({', '.join(catalogue.names)}) (got nothing)",
            )
        )
    elif delta.base not in catalogue:
        problems.append(
            Problem(
                source,
                "release.base",
                f"unknown base release; valid releases: "
                f"{', '.join(catalogue.names)} (got {_show(delta.base)})",
            )
        )
    else:
        base = catalogue.release(delta.base)
        if delta.version is not None and not delta.version > base.version:
            problems.append(
                Problem(
                    source,
                    "release.name",
                    f"a release must sort after its base {base.name} (got {_show(delta.name)})",
                )
            )
        if delta.date is not None and delta.date < base.date:
            problems.append(
                Problem(
                    source,
                    "release.date",
                    f"a release cannot predate its base {base.name} "
                    f"({base.date.isoformat()}) (got {_show(delta.date)})",
                )
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
            if packet_of(key) in base.op_rules or key in base.op_rules:
                continue
            if not delta.rule_is_table.get(key, False) or not rule.note:
                problems.append(
                    Problem(
                        source,
                        f"ops.{_show(key)}",
                        f"op not known to base release {base.name}; "
                        "a new op needs a full table rule with a note, e.g. "
                        '{decision = "native", note = "why"} (check the spelling) '
                        f"(got {_show_rule(rule, delta.rule_is_table.get(key, False))})",
                    )
                )
    if problems or base is None or delta.version is None or delta.date is None:
        raise CatalogueError(problems)
    release = _merge(delta, base)
    _check_consistency(release, problems)
    if problems:
        raise CatalogueError(problems)
    return release


def _unknown_gap(gap_id: str, gaps: Mapping[str, Gap]) -> str:
    close = difflib.get_close_matches(gap_id, list(gaps), n=1)
    hint = f" (did you mean {_show(close[0])}?)" if close else ""
    return f"unknown gap id{hint}; known gaps: {', '.join(sorted(gaps)) or '(none)'}"


def _check_gap_refs(delta: _Delta, gaps: Mapping[str, Gap], problems: list[Problem]) -> None:
    """Gap ids exist; lasting gaps are never closed."""
    for gap_id, state in delta.gap_states.items():
        gap = gaps.get(gap_id)
        if gap is None:
            problems.append(
                Problem(
                    delta.source,
                    f"gaps.{gap_id}",
                    f"{_unknown_gap(gap_id, gaps)} (got {_show(gap_id)})",
                )
            )
        elif gap.lasting and state is GapState.CLOSED:
            problems.append(
                Problem(
                    delta.source,
                    f"gaps.{gap_id}",
                    f"a lasting gap is never closed (got {_show(state.value)})",
                )
            )
    for op, rule in delta.op_rules.items():
        if rule.gap is not None and rule.gap not in gaps:
            problems.append(
                Problem(
                    delta.source,
                    f"ops.{_show(op)}.gap",
                    f"{_unknown_gap(rule.gap, gaps)} (got {_show(rule.gap)})",
                )
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
    delta: _Delta, base_name: str, base_upstream: Upstream | None, problems: list[Problem]
) -> None:
    """A release's upstream range starts after its base's range ends."""
    if delta.upstream is None or base_upstream is None:
        return
    if delta.upstream.start <= base_upstream.end:
        problems.append(
            Problem(
                delta.source,
                "release.upstream.from",
                f"the range must start after the range of "
                f"its base {base_name} ({base_upstream.start}..{base_upstream.end}) "
                f"(got {_show(delta.upstream.start)})",
            )
        )


def _check_commits_unique(deltas: Iterable[_Delta], problems: list[Problem]) -> None:
    """A commit belongs to one release: no sha is a prefix of a sha listed elsewhere."""
    seen: list[tuple[str, str]] = []
    for delta in deltas:
        if delta.upstream is None:
            continue
        for commit in delta.upstream.commits:
            for sha, where in seen:
                if sha.startswith(commit.sha) or commit.sha.startswith(sha):
                    problems.append(
                        Problem(
                            delta.source,
                            "release.upstream.commits",
                            f"commit {commit.sha} is "
                            f"also listed in {where} (got {_show(commit.sha)})",
                        )
                    )
            seen.append((commit.sha, delta.source))


def _check_consistency(release: Release, problems: list[Problem]) -> None:
    """An op that does not lower cannot name a gap that is closed at the same release."""
    for op, rule in release.op_rules.items():
        if rule.gap is None:
            continue
        state = release.gap_states.get(rule.gap)
        if state is GapState.CLOSED:
            problems.append(
                Problem(
                    release.source,
                    f"ops.{_show(op)}",
                    f"decision {_show(rule.decision.value)} names gap "
                    f"{_show(rule.gap)}, which is closed at {release.name}; update the op or the gap "
                    f"state (got {_show(rule.decision.value)})",
                )
            )


def _load_catalogue(files: list[tuple[str, bytes]]) -> Catalogue:
    problems: list[Problem] = []
    gaps: dict[str, Gap] = {}
    deltas: list[_Delta] = []
    gaps_seen = False
    for source, raw in files:
        if Path(source).name == _GAPS_FILE:
            gaps_seen = True
            gaps_reader = _GapsFileReader(source)
            gaps = gaps_reader.gaps_file(raw)
            problems.extend(gaps_reader.problems)
        else:
            reader = _ReleaseFileReader(source)
            delta = reader.release_file(raw)
            if delta is not None:
                deltas.append(delta)
            problems.extend(reader.problems)
    if not gaps_seen:
        problems.append(Problem(_GAPS_FILE, "", "the catalogue has no gaps file (got nothing)"))
    if not deltas and not problems:
        problems.append(Problem("<catalogue>", "<files>", "no release files (got nothing)"))

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
                Problem(
                    delta.source,
                    "release.name",
                    f"duplicate release name, also in {clash.source} (got {_show(delta.name)})",
                )
            )
            continue
        by_name[delta.name] = delta

    roots = [d for d in by_name.values() if d.base is None]
    if by_name and len(roots) != 1:
        problems.append(
            Problem(
                "<catalogue>",
                "release.base",
                "exactly one release (the first) has no base "
                f"(got {_show([d.name for d in roots])})",
            )
        )
    for delta in by_name.values():
        if delta.base is None:
            missing = sorted(set(gaps) - set(delta.gap_states))
            if missing:
                problems.append(
                    Problem(
                        delta.source,
                        "gaps",
                        f"the first release must give the state of every "
                        f"gap; missing: {', '.join(missing)} (got {_show(sorted(delta.gap_states))})",
                    )
                )
            continue
        base = by_name.get(delta.base)
        if base is None:
            problems.append(
                Problem(
                    delta.source,
                    "release.base",
                    f"unknown base release; valid releases: "
                    f"{', '.join(sorted(by_name))} (got {_show(delta.base)})",
                )
            )
        elif (
            delta.version is not None
            and base.version is not None
            and not delta.version > base.version
        ):
            problems.append(
                Problem(
                    delta.source,
                    "release.name",
                    f"a release must sort after its base {base.name} (got {_show(delta.name)})",
                )
            )
        if base is not None and delta.date and base.date and delta.date < base.date:
            problems.append(
                Problem(
                    delta.source,
                    "release.date",
                    f"a release cannot predate its base {base.name} "
                    f"({base.date.isoformat()}) (got {_show(delta.date)})",
                )
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
                        Problem(
                            start.source,
                            "release.base",
                            f"releases extend each other in a cycle "
                            f"{chain} (got {_show(start.base)})",
                        )
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
