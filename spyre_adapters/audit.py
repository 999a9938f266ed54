"""Audit reports: every adapter's status at a release, the gate findings, and the JSON schema.

An :class:`AuditReport` is what ``spyre-adapters audit`` prints and what
``spyre_adapters.enablement.verify.verify_retirable`` receives; build one with :func:`audit_release`. Gate findings:

- ``overdue`` adapters always fail the gate;
- with ``strict``, so do scaffolding adapters whose every gap is closed at the release
  (``retirable``, and ``retired`` ones too: both mean the manifest's ``stacks`` still admits a
  release where the adapter is dead code; cap ``stacks`` below that release or delete it).

JSON schema (``schema_version`` 1; keys are only ever added, never renamed)::

    {
      "schema_version": 1,
      "kind": "audit",
      "release": "2026.05",            # the audited release
      "auto_retire": true,
      "strict": false,
      "today": "2026-11-30",           # the date waivers were judged on
      "adapters": [                    # one per adapter name, sorted by name
        {
          "name": "rope-rotation",
          "version": "1.0.0",          # resolved version (highest installed when out of range)
          "versions": ["1.0.0"],       # every installed version
          "kind": "scaffolding",       # or "permanent"
          "status": "active",          # active|retirable|retired|permanent|out-of-range|overdue
          "applied": true,             # prepare() applies it at this release
          "gaps": ["sin-cos", "rotate-half"],
          "open_gaps": ["sin-cos", "rotate-half"],
          "retirable_in": null,        # first release >= this one closing every gap, or null
          "retire_by": null,
          "stacks": ">=2025.12",
          "waiver": null,              # or {"reason": "...", "expires": "2026-12-31", "valid": true}
          "reason": "gap still open: sin-cos, rotate-half",
          "source": "plugin 'builtin' file .../rope-rotation/1.0.0.toml",
          "superseded": []             # older installed versions this one supersedes here
        }
      ],
      "superseded": [                  # one per superseded version, sorted by name, version
        {"name": "host-mask", "version": "1.0.0", "by": "1.0.1",
         "reason": "host-mask 1.0.1 supersedes it at 2026.05"}
      ],
      "counts": {"active": 1, "retirable": 0, ...},   # every status, zeros included
      "findings": [{"adapter": "...", "status": "overdue", "message": "..."}],
      "passed": true                   # no finding
    }

A superseded version is never a gate finding: it stays installed (released versions are
immutable) for the locks that pin it.

A diff between two releases (``kind`` ``"audit-diff"``) holds ``"from"`` and ``"to"`` (two
audit documents as above) and ``"changes"``: ``[{"name", "from": {"version", "status"} | null,
"to": {"version", "status"} | null}]`` for adapters whose resolved version or status differs.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spyre_adapters.lifecycle import AdapterStatus, Lifecycle, Status, StatusChange
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import ReleaseLike
from spyre_adapters.waivers import Waiver, check_waivers

__all__ = [
    "AUDIT_SCHEMA_VERSION",
    "AuditDiff",
    "AuditReport",
    "AuditFinding",
    "audit_release",
    "audit_diff",
]

AUDIT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AuditFinding:
    """An adapter that fails the audit gate, and why."""

    adapter: str
    status: Status
    message: str


@dataclass(frozen=True)
class AuditReport:
    """Every adapter's status at ``release`` (see the module docstring)."""

    release: str
    rows: tuple[AdapterStatus, ...]
    auto_retire: bool
    strict: bool
    today: _dt.date
    sources: tuple[str, ...]
    superseded: tuple[AdapterStatus, ...] = ()

    def findings(self) -> list[AuditFinding]:
        """The rows that fail the gate, in row order."""
        found = []
        for row in self.rows:
            if row.status is Status.OVERDUE:
                found.append(
                    AuditFinding(
                        row.name,
                        row.status,
                        f"{row.name} {row.version} is overdue at {self.release}: {row.reason}; "
                        f"delete it, or add a waiver with a reason and an expiry date",
                    )
                )
            elif self.strict and row.status in (Status.RETIRABLE, Status.RETIRED):
                found.append(
                    AuditFinding(
                        row.name,
                        row.status,
                        f"{row.name} {row.version} is {row.status.value} at {self.release} "
                        f"(every gap closed: {', '.join(row.manifest.gaps)}); cap its stacks "
                        f"below {self.release} or delete it",
                    )
                )
        return found

    def retirable(self) -> tuple[AdapterStatus, ...]:
        """Scaffolding whose every gap is closed at the release (``retirable`` or ``retired``)."""
        return tuple(r for r in self.rows if r.status in (Status.RETIRABLE, Status.RETIRED))

    def counts(self) -> dict[str, int]:
        """How many adapters have each status (every status listed)."""
        counts = {status.value: 0 for status in Status}
        for row in (*self.rows, *self.superseded):
            counts[row.status.value] += 1
        return counts

    def resolved(self, name: str) -> AdapterStatus | None:
        """The row of adapter ``name``."""
        return next((r for r in self.rows if r.name == name), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of the module docstring."""
        findings = self.findings()
        resolved = {row.name: str(row.version) for row in self.rows}
        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "kind": "audit",
            "release": self.release,
            "auto_retire": self.auto_retire,
            "strict": self.strict,
            "today": self.today.isoformat(),
            "adapters": [
                _row_json(row, source) for row, source in zip(self.rows, self.sources, strict=True)
            ],
            "superseded": [
                {
                    "name": row.name,
                    "version": str(row.version),
                    "by": resolved.get(row.name),
                    "reason": row.reason,
                }
                for row in self.superseded
            ],
            "counts": self.counts(),
            "findings": [
                {"adapter": f.adapter, "status": f.status.value, "message": f.message}
                for f in findings
            ],
            "passed": not findings,
        }


def _row_json(row: AdapterStatus, source: str) -> dict[str, Any]:
    manifest = row.manifest
    waiver = None
    if row.waiver is not None:
        waiver = {
            "reason": row.waiver.reason,
            "expires": row.waiver.expires.isoformat(),
            "valid": row.status is not Status.OVERDUE,
        }
    return {
        "name": row.name,
        "version": str(row.version),
        "versions": [str(v) for v in row.versions],
        "kind": manifest.kind.value,
        "status": row.status.value,
        "applied": row.applied,
        "gaps": list(manifest.gaps),
        "open_gaps": list(row.open_gaps),
        "retirable_in": row.retirable_in,
        "retire_by": manifest.retire_by,
        "stacks": str(manifest.stacks),
        "waiver": waiver,
        "reason": row.reason,
        "source": source,
        "superseded": [str(v) for v in row.superseded],
    }


@dataclass(frozen=True)
class AuditDiff:
    """The audits of two releases and the adapters whose version or status changed."""

    before: AuditReport
    after: AuditReport
    changes: tuple[StatusChange, ...]

    def to_json(self) -> dict[str, Any]:
        def side(row: AdapterStatus | None) -> dict[str, str] | None:
            return (
                None if row is None else {"version": str(row.version), "status": row.status.value}
            )

        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "kind": "audit-diff",
            "from": self.before.to_json(),
            "to": self.after.to_json(),
            "changes": [
                {"name": c.name, "from": side(c.before), "to": side(c.after)} for c in self.changes
            ],
        }


def audit_release(
    registry: Registry,
    stack: str | os.PathLike[str] | ReleaseLike | None = None,
    *,
    waivers: Iterable[Waiver] = (),
    today: _dt.date | None = None,
    auto_retire: bool = True,
    strict: bool = False,
) -> AuditReport:
    """Audit every adapter of ``registry`` at ``stack`` (default: the catalogue's newest).
    A waiver about an adapter or version that is not installed is a
    :class:`~spyre_adapters.errors.WaiverError`."""
    waivers = tuple(waivers)
    check_waivers(waivers, registry)
    today = _dt.date.today() if today is None else today
    lifecycle = Lifecycle(registry, waivers=waivers, today=today, auto_retire=auto_retire)
    release = lifecycle.release(stack if stack is not None else lifecycle.catalogue.releases[-1])
    rows = tuple(lifecycle.status_at(release))
    superseded = tuple(old for row in rows for old in lifecycle.superseded_rows(row, release))
    return AuditReport(
        release=release.name,
        rows=rows,
        auto_retire=auto_retire,
        strict=strict,
        today=today,
        sources=tuple(registry.source_of(row.manifest) for row in rows),
        superseded=superseded,
    )


def audit_diff(
    registry: Registry,
    before: str | os.PathLike[str] | ReleaseLike,
    after: str | os.PathLike[str] | ReleaseLike,
    *,
    waivers: Iterable[Waiver] = (),
    today: _dt.date | None = None,
    auto_retire: bool = True,
    strict: bool = False,
) -> AuditDiff:
    """Audit two releases and list what changed between them."""
    waivers = tuple(waivers)
    old = audit_release(
        registry, before, waivers=waivers, today=today, auto_retire=auto_retire, strict=strict
    )
    new = audit_release(
        registry, after, waivers=waivers, today=today, auto_retire=auto_retire, strict=strict
    )
    by_name_old = {r.name: r for r in old.rows}
    by_name_new = {r.name: r for r in new.rows}
    changes = []
    for name in sorted(by_name_old.keys() | by_name_new.keys()):
        a, b = by_name_old.get(name), by_name_new.get(name)
        if a is None or b is None or (a.status, a.version) != (b.status, b.version):
            changes.append(StatusChange(name, a, b))
    return AuditDiff(old, new, tuple(changes))
