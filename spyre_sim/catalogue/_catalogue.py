"""The catalogue: an ordered set of releases and the gaps they describe, with its lookups.

One place answers "which release is this name" (:meth:`Catalogue.release`, raising
:class:`~spyre_sim.errors.UnknownReleaseError`), "where does this gap close"
(:meth:`Catalogue.first_closing`) and "where does this op first run / lower"
(:meth:`Catalogue.first_running`, :meth:`Catalogue.first_lowering`); every layer asks it.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

from packaging.version import InvalidVersion, Version

from spyre_sim.catalogue import _diff
from spyre_sim.catalogue._diff import CatalogueDiff
from spyre_sim.catalogue._model import (
    _LOWERED,
    _RUNS,
    Decision,
    Gap,
    GapState,
    OpRule,
    Release,
    UpstreamCommit,
)
from spyre_sim.errors import SpyreSimError, UnknownReleaseError


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
        """The release called ``name`` (``"2026.05"``; ``"2026.5"`` is accepted too); an unknown
        name raises :class:`~spyre_sim.errors.UnknownReleaseError` listing the known ones. The
        one release lookup of the project: every layer asks it."""
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
        raise UnknownReleaseError(name, self.names)

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
        release in ``(old, new]`` whose file set the new value, and that line's evidence
        (:func:`spyre_sim.catalogue._diff.diff`)."""
        return _diff.diff(self, old, new)

    def with_release_file(self, path: str | os.PathLike[str]) -> Catalogue:
        """A new catalogue: this one plus the user release in the TOML file at ``path``."""
        from spyre_sim.catalogue._loading import load_release_file

        added = load_release_file(path, self)
        return Catalogue((*self.releases, added), self.gaps)

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> Catalogue:
        """Load a whole catalogue (``gaps.toml`` plus one TOML file per release)."""
        from spyre_sim.catalogue._loading import _load_catalogue

        root = Path(directory)
        files = sorted(p for p in root.glob("*.toml"))
        return _load_catalogue([(str(p), p.read_bytes()) for p in files])
