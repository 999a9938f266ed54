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

Resolution picks, per adapter name, the highest version whose ``stacks`` admits R. Gap states
are read per release, so a gap that re-opens later (a regression such as ``mem-pool`` in
2026.08) brings its adapter back at that release. ``retirable_in`` is the first release at or
after R (in the catalogue) at which every bridged gap is closed.
"""

from __future__ import annotations

import datetime as _dt
import enum
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from spyre_adapters.manifest import AdapterKind, Manifest
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

    @property
    def applied(self) -> bool:
        """Whether an adapter with this status is applied by ``prepare``."""
        return self not in (Status.RETIRED, Status.OUT_OF_RANGE)


@dataclass(frozen=True)
class AdapterStatus:
    """One adapter at one release.

    ``manifest`` is the version resolved at ``release`` (the highest installed version when
    none is in range); ``open_gaps`` the bridged gaps still open at ``release``;
    ``retirable_in`` the first release at or after ``release`` closing every bridged gap
    (``None``: no known release does); ``waiver`` the waiver considered (in force, or expired
    when the status is ``overdue``); ``reason`` says why, in words.
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
            if not any(candidate.gap_open(g) for g in manifest.gaps):
                return candidate.name
        return None

    def resolve_version(self, name: str, stack: ReleaseLike | str) -> Manifest | None:
        """The highest installed version of ``name`` whose ``stacks`` admits the release."""
        release = self.release(stack)
        admitted = [m for m in self.registry.versions(name) if m.admits(release.version)]
        return admitted[-1] if admitted else None

    def status_of(self, manifest: Manifest, stack: ReleaseLike | str) -> AdapterStatus:
        """The status of this manifest version at a release (ignoring other versions)."""
        return self._status(manifest, self.release(stack), versions=(manifest.version,))

    def _status(
        self, manifest: Manifest, release: ReleaseLike, versions: tuple[Version, ...]
    ) -> AdapterStatus:
        open_gaps = tuple(g for g in manifest.gaps if release.gap_open(g))
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
        if open_gaps:
            status, reason = Status.ACTIVE, "gap still open: " + ", ".join(open_gaps)
        elif self.auto_retire:
            return make(
                Status.RETIRED, "every gap closed: " + ", ".join(manifest.gaps) + "; auto-retired"
            )
        else:
            status = Status.RETIRABLE
            reason = "every gap closed: " + ", ".join(manifest.gaps) + "; kept (auto-retire off)"
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

    def _row(self, name: str, release: ReleaseLike) -> AdapterStatus:
        installed = self.registry.versions(name)
        versions = tuple(m.version for m in installed)
        admitted = [m for m in installed if m.admits(release.version)]
        chosen = admitted[-1] if admitted else installed[-1]
        return self._status(chosen, release, versions)

    def resolve(self, stack: str | os.PathLike[str] | ReleaseLike | None) -> list[Manifest]:
        """The manifests ``prepare`` applies at a release, in application order
        (``order``, then name)."""
        chosen = [row.manifest for row in self.status_at(stack) if row.applied]
        return sorted(chosen, key=lambda m: (m.order, m.name))

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
