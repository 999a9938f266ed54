"""Checking a lock against what is installed: :func:`check_lock` gives every
:class:`LockFinding` (``stale``, ``tampered``, ``superseded``, ``provider``: see
:mod:`spyre_adapters.lock`), and :func:`pinned_manifests` the exact manifests a lock pins for a
release, refusing a pinned adapter that is missing or no longer hashes as recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import Version

from spyre_adapters._lock_model import Lock, PinnedAdapter, lock_release, manifest_sha256
from spyre_adapters.errors import LockError, Problem, UnknownAdapterError
from spyre_adapters.implementation import implementation_sha256, one_installation, provider
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import ReleaseLike

__all__ = ["FAILING_FINDINGS", "LockFinding", "check_lock", "pinned_manifests"]

#: Finding kinds that make a lock fail ``check``; the others are reported only.
FAILING_FINDINGS = frozenset({"stale", "tampered"})


@dataclass(frozen=True)
class LockFinding:
    """How a lock entry differs from the installed adapters.

    ``kind``: ``"stale"`` or ``"tampered"`` (the lock fails ``check``), ``"superseded"`` or
    ``"provider"`` (reported only; see :mod:`spyre_adapters.lock`). ``newer`` is the version that
    supersedes the pin (``superseded`` only).
    """

    release: str
    adapter: str
    kind: str
    message: str
    newer: Version | None = None

    @property
    def failing(self) -> bool:
        """Whether this finding makes the lock fail ``check``."""
        return self.kind in FAILING_FINDINGS

    def __str__(self) -> str:
        return f'releases."{self.release}" {self.adapter}: {self.kind}: {self.message}'


def check_lock(
    lock: Lock,
    registry: Registry,
    releases: Iterable[str | os.PathLike[str] | ReleaseLike] | None = None,
) -> list[LockFinding]:
    """Every way the lock's entries differ from what is installed (:mod:`spyre_adapters.lock`):
    all entries, or those of ``releases`` (names, release files or release objects; a user
    release file must be given here for its entry to be re-resolved). A table for a release the
    catalogue does not know is a :class:`LockError` naming the lock file."""
    findings: list[LockFinding] = []
    specs = sorted(lock.entries) if releases is None else list(releases)
    with one_installation():
        for spec in specs:
            if releases is None:
                release = lock_release(lock, Lifecycle(registry), spec)
            else:
                release = Lifecycle(registry).release(spec)
            findings.extend(_check_entry(lock, registry, release))
    return findings


def _check_entry(lock: Lock, registry: Registry, release: ReleaseLike) -> list[LockFinding]:
    release_name = release.name
    entry = lock.entry(release_name)
    lifecycle = Lifecycle(registry, auto_retire=entry.auto_retire)
    resolved = {m.name: m for m in lifecycle.resolve(release)}
    pinned = {p.name: p for p in entry.adapters}
    findings: list[LockFinding] = []
    for name in sorted(resolved.keys() | pinned.keys()):
        now, then = resolved.get(name), pinned.get(name)
        if then is None:
            assert now is not None
            findings.append(
                LockFinding(
                    release_name,
                    name,
                    "stale",
                    f"resolution now applies {now.label}, which the lock does not pin",
                )
            )
            continue
        installed = any(m.version == then.version for m in registry.versions(name))
        if now is None and installed:
            findings.append(
                LockFinding(
                    release_name,
                    name,
                    "stale",
                    f"the lock pins {then.label}, which resolution no longer applies",
                )
            )
        elif now is not None and installed and now.version > then.version:
            newer = lifecycle.superseded_by(registry.get(name, then.version), release)
            if newer is not None:
                findings.append(
                    LockFinding(
                        release_name,
                        name,
                        "superseded",
                        f"pinned {then.version}; {now.version} supersedes it at {release_name} "
                        f"(`spyre-adapters pin --upgrade {name}` moves the pin)",
                        now.version,
                    )
                )
            else:
                findings.append(
                    LockFinding(
                        release_name,
                        name,
                        "stale",
                        f"the lock pins version {then.version}, resolution now gives {now.version}",
                    )
                )
        elif now is not None and installed and now.version != then.version:
            findings.append(
                LockFinding(
                    release_name,
                    name,
                    "stale",
                    f"the lock pins version {then.version}, resolution now gives {now.version}",
                )
            )
        findings.extend(_tamper_findings(release_name, then, registry))
    return findings


def _tamper_findings(release: str, pinned: PinnedAdapter, registry: Registry) -> list[LockFinding]:
    try:
        manifest = registry.get(pinned.name, pinned.version)
    except UnknownAdapterError:
        return [
            LockFinding(
                release,
                pinned.name,
                "stale",
                f"pinned version {pinned.version} is not installed (it was provided by "
                f"{pinned.provided_by}; reinstall it, or re-pin)",
            )
        ]
    findings = []
    current = manifest_sha256(manifest)
    if current != pinned.manifest_sha256:
        findings.append(
            LockFinding(
                release,
                pinned.name,
                "tampered",
                f"manifest {manifest.source or manifest.label} hashes to {current[:12]}..., the "
                f"lock recorded {pinned.manifest_sha256[:12]}...",
            )
        )
    current = implementation_sha256(manifest)
    if current != pinned.implementation_sha256:
        findings.append(
            LockFinding(
                release,
                pinned.name,
                "tampered",
                f"implementation {manifest.entry_point} hashes to {current[:12]}..., the lock "
                f"recorded {pinned.implementation_sha256[:12]}...",
            )
        )
    if findings:
        return findings
    dist = provider(manifest, registry)
    was = (pinned.distribution, pinned.distribution_version)
    if dist is not None and pinned.distribution is not None and (dist.name, dist.version) != was:
        findings.append(
            LockFinding(
                release,
                pinned.name,
                "provider",
                f"{pinned.label} was pinned from {pinned.provided_by}, is now provided by "
                f"{dist}; its manifest and implementation are unchanged",
            )
        )
    return findings


def pinned_manifests(lock: Lock, registry: Registry, release: str) -> list[Manifest]:
    """Exactly the manifests pinned for ``release``, in application order; :class:`LockError`
    when the release is not pinned, or a pinned adapter is missing or tampered."""
    entry = lock.entry(release)
    problems = []
    manifests = []
    for pinned in entry.adapters:
        findings = [f for f in _tamper_findings(release, pinned, registry) if f.failing]
        for finding in findings:
            problems.append(
                Problem(
                    lock.source or "lock",
                    f'releases."{release}" {pinned.name}',
                    f"{finding.kind}: {finding.message}; re-pin with `spyre-adapters pin --stack "
                    f"{release}` after reviewing the change",
                )
            )
        if not findings:
            manifests.append(registry.get(pinned.name, pinned.version))
    if problems:
        raise LockError(problems)
    return sorted(manifests, key=lambda m: (m.order, m.name))
