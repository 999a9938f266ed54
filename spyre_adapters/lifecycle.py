"""The lifecycle manager: for a stack release R, what each adapter is and whether it is applied.

Statuses (one per adapter name, for the version resolved at R):

- ``active``: some bridged gap is still open at R; applied.
- ``retirable``: scaffolding whose every gap is closed at R, kept because auto-retirement is off
  (or a lock pins it); applied, and a finding for ``audit --strict``.
- ``retired``: scaffolding whose every gap is closed at R, auto-retired: not applied.
- ``permanent``: bridges a lasting hardware property; applied at every release in range.
- ``out-of-range``: no installed version's ``stacks`` specifier admits R; not applied.
- ``overdue``: R is past the adapter's ``retire_by`` and it would still be applied, with no
  waiver in force (an expired waiver is no waiver); applied (the model still needs it), and a
  gate finding.
- ``superseded`` (a version, not a name): a newer installed version of the same adapter is the
  one resolved at R, and this version's ``stacks`` admits R too; not applied (unless a lock
  pins it). An old version retires like any scaffolding: where a newer one covers the release,
  it is simply not chosen, and it stays installed for the locks that pin it.

Resolution picks, per adapter name, the newest version whose ``stacks`` admits R and that is
needed at R (a gap still open, or permanent); when every admitted version's gaps are closed, the
newest admitted one is reported ``retired`` (with auto-retirement off, the newest admitted
version, ``retirable``). Gap states are read per release, so a gap that re-opens later (a
regression such as ``mem-pool`` in 2026.08) brings its adapter back at that release. A generated
op bridge's gaps are read through its ops (:meth:`~spyre_adapters.manifest.Manifest.open_gaps`):
it is needed only while the release does not lower an op it bridges.
``retirable_in`` is the first release at or after R (in the catalogue) at which every bridged
gap is closed. :meth:`Lifecycle.versions_at` gives one row per installed version.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from spyre_adapters.manifest import AdapterKind, Manifest
from spyre_adapters.ordering import application_order
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import CatalogueLike, ReleaseLike, release_of
from spyre_adapters.waivers import Waiver, find_waiver

__all__ = ["AdapterStatus", "Lifecycle", "Status", "StatusChange", "status_at"]


class Status(enum.Enum):
    """The status of an adapter at a release (see the module docstring)."""

    ACTIVE = "active"
    RETIRABLE = "retirable"
    RETIRED = "retired"
    PERMANENT = "permanent"
    OUT_OF_RANGE = "out-of-range"
    OVERDUE = "overdue"
    SUPERSEDED = "superseded"

    @property
    def applied(self) -> bool:
        """Whether an adapter with this status is applied by ``prepare``."""
        return self not in (Status.RETIRED, Status.OUT_OF_RANGE, Status.SUPERSEDED)


@dataclass(frozen=True)
class AdapterStatus:
    """One adapter at one release.

    ``manifest`` is the version resolved at ``release`` (the highest installed version when
    none is in range); ``open_gaps`` the bridged gaps still open at ``release``;
    ``retirable_in`` the first release at or after ``release`` closing every bridged gap
    (``None``: no known release does); ``waiver`` the waiver considered (in force, or expired
    when the status is ``overdue``); ``reason`` says why, in words; ``versions`` every installed
    version; ``superseded`` the older installed versions that also admit ``release`` and that
    this one supersedes there (empty for a row that is not the resolved version).
    """

    name: str
    release: str
    status: Status
    manifest: Manifest
    open_gaps: tuple[str, ...]
    retirable_in: str | None
    waiver: Waiver | None
    reason: str
    versions: tuple[Version, ...]
    superseded: tuple[Version, ...] = ()

    @property
    def version(self) -> Version:
        return self.manifest.version

    @property
    def applied(self) -> bool:
        """Whether ``prepare`` applies this adapter at ``release``."""
        return self.status.applied

    @property
    def retirable(self) -> bool:
        """Scaffolding whose every gap is closed at ``release``: status ``retirable`` (kept)
        or ``retired`` (auto-retired)."""
        return self.status in (Status.RETIRABLE, Status.RETIRED)


@dataclass(frozen=True)
class StatusChange:
    """An adapter whose resolved version or status differs between two releases."""

    name: str
    before: AdapterStatus | None
    after: AdapterStatus | None


class Lifecycle:
    """Statuses and resolution of a registry's adapters at stack releases.

    ``catalogue`` defaults to the registry's. ``today`` decides whether waivers hold (default:
    the date when a status is computed; pass it explicitly for reproducible results).
    ``auto_retire=False`` keeps retirable scaffolding applied (status ``retirable``).
    """

    def __init__(
        self,
        registry: Registry,
        catalogue: CatalogueLike | None = None,
        *,
        waivers: Iterable[Waiver] = (),
        today: _dt.date | None = None,
        auto_retire: bool = True,
    ) -> None:
        self.registry = registry
        self.catalogue = registry.catalogue if catalogue is None else catalogue
        self.waivers = tuple(waivers)
        self.today = today
        self.auto_retire = auto_retire

    # -- releases ----------------------------------------------------------------------------
    def release(self, stack: str | os.PathLike[str] | ReleaseLike | None) -> ReleaseLike:
        """Turn a release name, release file or release object into a release."""
        return release_of(stack, self.catalogue)

    def _releases_from(self, release: ReleaseLike) -> list[ReleaseLike]:
        later = [r for r in self.catalogue.releases if r.version >= release.version]
        if not later or later[0].name != release.name:
            later.insert(0, release)  # a user release file: itself first
        return later

    # -- per manifest ------------------------------------------------------------------------
    def retirable_in(self, manifest: Manifest, stack: ReleaseLike | str) -> str | None:
        """The first release at or after ``stack`` where every gap of ``manifest`` is closed."""
        if manifest.kind is AdapterKind.PERMANENT:
            return None
        for candidate in self._releases_from(self.release(stack)):
            if not manifest.open_gaps(candidate):
                return candidate.name
        return None

    def resolve_version(self, name: str, stack: ReleaseLike | str) -> Manifest | None:
        """The version of ``name`` resolution picks at the release (see the module docstring),
        ``None`` when no installed version admits it."""
        return self._choose(self.registry.versions(name), self.release(stack))

    def _needed(self, manifest: Manifest, release: ReleaseLike) -> bool:
        return manifest.kind is AdapterKind.PERMANENT or bool(manifest.open_gaps(release))

    def _choose(self, installed: Sequence[Manifest], release: ReleaseLike) -> Manifest | None:
        admitted = [m for m in installed if m.admits(release.version)]
        if not admitted:
            return None
        if self.auto_retire:
            needed = [m for m in admitted if self._needed(m, release)]
            if needed:
                return needed[-1]
        return admitted[-1]

    def superseded_by(self, manifest: Manifest, stack: ReleaseLike | str) -> Manifest | None:
        """The newer version of the same adapter that resolution picks at the release instead
        of ``manifest`` (``manifest`` admitting the release too), else ``None``."""
        release = self.release(stack)
        if not manifest.admits(release.version):
            return None
        chosen = self._choose(self.registry.versions(manifest.name), release)
        if chosen is None or chosen.version <= manifest.version:
            return None
        return chosen

    def status_of(self, manifest: Manifest, stack: ReleaseLike | str) -> AdapterStatus:
        """The status of this manifest version at a release (ignoring other versions)."""
        return self._status(manifest, self.release(stack), versions=(manifest.version,))

    def _status(
        self, manifest: Manifest, release: ReleaseLike, versions: tuple[Version, ...]
    ) -> AdapterStatus:
        open_gaps = manifest.open_gaps(release)
        retirable_in = self.retirable_in(manifest, release)

        def make(status: Status, reason: str, waiver: Waiver | None = None) -> AdapterStatus:
            return AdapterStatus(
                name=manifest.name,
                release=release.name,
                status=status,
                manifest=manifest,
                open_gaps=open_gaps,
                retirable_in=retirable_in,
                waiver=waiver,
                reason=reason,
                versions=versions,
            )

        if not manifest.admits(release.version):
            return make(
                Status.OUT_OF_RANGE,
                f"stacks {str(manifest.stacks)!r} does not admit {release.name}",
            )
        if manifest.kind is AdapterKind.PERMANENT:
            return make(Status.PERMANENT, "bridges a lasting gap: " + ", ".join(manifest.gaps))
        closed = "every gap closed: " + ", ".join(manifest.gaps)
        if manifest.bridges and any(release.gap_open(g) for g in manifest.gaps):
            # an op bridge of a gap that stays open: the release runs each op it bridges
            closed = f"{release.name} runs " + ", ".join(b.op for b in manifest.bridges)
        if open_gaps:
            status, reason = Status.ACTIVE, "gap still open: " + ", ".join(open_gaps)
        elif self.auto_retire:
            return make(Status.RETIRED, closed + "; auto-retired")
        else:
            status = Status.RETIRABLE
            reason = closed + "; kept (auto-retire off)"
        if manifest.retire_by is None or release.version <= Version(manifest.retire_by):
            return make(status, reason)
        waiver = find_waiver(self.waivers, manifest.name, manifest.version)
        today = _dt.date.today() if self.today is None else self.today
        if waiver is not None and waiver.valid_on(today):
            return make(
                status,
                f"{reason}; past retire_by {manifest.retire_by}, waived until "
                f"{waiver.expires.isoformat()}: {waiver.reason}",
                waiver,
            )
        expired = f"; waiver expired on {waiver.expires.isoformat()}" if waiver is not None else ""
        return make(
            Status.OVERDUE,
            f"{release.name} is past retire_by {manifest.retire_by}{expired}; {reason}",
            waiver,
        )

    # -- per release ---------------------------------------------------------------------------
    def status_at(self, stack: str | os.PathLike[str] | ReleaseLike | None) -> list[AdapterStatus]:
        """One status per adapter name at a release, sorted by name."""
        release = self.release(stack)
        return [self._row(name, release) for name in self.registry.names()]

    def status_for(
        self, name: str, stack: str | os.PathLike[str] | ReleaseLike | None
    ) -> AdapterStatus:
        """The row of :meth:`status_at` for adapter ``name`` alone (UnknownAdapterError for a
        name not installed)."""
        self.registry.get(name)
        return self._row(name, self.release(stack))

    def _row(self, name: str, release: ReleaseLike) -> AdapterStatus:
        installed = self.registry.versions(name)
        versions = tuple(m.version for m in installed)
        chosen = self._choose(installed, release)
        if chosen is None:
            return self._status(installed[-1], release, versions)
        row = self._status(chosen, release, versions)
        older = tuple(
            m.version for m in installed if m.version < chosen.version and m.admits(release.version)
        )
        return dataclasses.replace(row, superseded=older) if older else row

    def versions_at(
        self, stack: str | os.PathLike[str] | ReleaseLike | None
    ) -> list[AdapterStatus]:
        """One status per installed *version* at a release, sorted by name then version: the
        resolved version as in :meth:`status_at`, an older version it covers ``superseded``,
        the others as their own manifest says (``out-of-range``, ``retired``, ...)."""
        release = self.release(stack)
        rows: list[AdapterStatus] = []
        for name in self.registry.names():
            resolved = self._row(name, release)
            superseded = {row.version: row for row in self.superseded_rows(resolved, release)}
            for manifest in self.registry.versions(name):
                if manifest.version == resolved.version:
                    rows.append(resolved)
                elif manifest.version in superseded:
                    rows.append(superseded[manifest.version])
                else:
                    rows.append(self._status(manifest, release, resolved.versions))
        return rows

    def superseded_rows(
        self, resolved: AdapterStatus, stack: str | os.PathLike[str] | ReleaseLike
    ) -> list[AdapterStatus]:
        """The ``superseded`` rows of the older versions that ``resolved`` (a row of
        :meth:`status_at` at ``stack``) covers there, oldest first."""
        if not resolved.superseded:
            return []
        release = self.release(stack)
        rows = []
        for version in resolved.superseded:
            own = self._status(
                self.registry.get(resolved.name, version), release, resolved.versions
            )
            rows.append(
                dataclasses.replace(
                    own,
                    status=Status.SUPERSEDED,
                    reason=f"{resolved.manifest.label} supersedes it at {release.name}",
                    waiver=None,
                )
            )
        return rows

    def resolve(self, stack: str | os.PathLike[str] | ReleaseLike | None) -> list[Manifest]:
        """The manifests ``prepare`` applies at a release, in application order
        (:func:`spyre_adapters.ordering.application_order`: ``after``, then ``order``, then
        name)."""
        chosen = [row.manifest for row in self.status_at(stack) if row.applied]
        return application_order(chosen, self.registry.names())

    def diff(
        self,
        before: str | os.PathLike[str] | ReleaseLike,
        after: str | os.PathLike[str] | ReleaseLike,
    ) -> list[StatusChange]:
        """Adapters whose resolved version or status differs between two releases."""
        old = {row.name: row for row in self.status_at(before)}
        new = {row.name: row for row in self.status_at(after)}
        changes = []
        for name in sorted(old.keys() | new.keys()):
            a, b = old.get(name), new.get(name)
            if a is None or b is None or (a.status, a.version) != (b.status, b.version):
                changes.append(StatusChange(name, a, b))
        return changes

    def timeline(self, name: str) -> list[AdapterStatus]:
        """The status of adapter ``name`` at every release of the catalogue, oldest first."""
        self.registry.get(name)  # raises UnknownAdapterError for a bad name
        return [self._row(name, release) for release in self.catalogue.releases]


def status_at(
    registry: Registry,
    stack: str | os.PathLike[str] | ReleaseLike | None = None,
    *,
    waivers: Sequence[Waiver] = (),
    today: _dt.date | None = None,
    auto_retire: bool = True,
) -> list[AdapterStatus]:
    """Shorthand for ``Lifecycle(registry, waivers=..., today=..., auto_retire=...).status_at(stack)``."""
    return Lifecycle(registry, waivers=waivers, today=today, auto_retire=auto_retire).status_at(
        stack
    )
