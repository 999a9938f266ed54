"""Pins: a lock file recording, per stack release, the exact adapter versions to apply.

Format (TOML, default file name ``spyre-adapters.lock``, written with ``tomli-w``)::

    # spyre-adapters lock file: written by `spyre-adapters pin`; verify with
    # `spyre-adapters check`. Do not edit by hand: re-pin instead.
    schema_version = 2

    [releases."2026.05"]
    auto_retire = true

    [[releases."2026.05".adapters]]
    name = "host-mask"
    version = "1.0.1"
    manifest_sha256 = "<64 hex>"
    implementation_sha256 = "<64 hex>"
    distribution = "spyre-adapters"
    distribution_version = "0.1.0"

One table per release; in it, one entry per adapter name with the version pinned, the hash of
its manifest file, the hash of its implementation (:mod:`spyre_adapters.implementation`: a
distribution's recorded files, or the built-ins' sources) and the distribution (and version)
that provided it (omitted when no installed distribution does).

What a lock guarantees: a run under it applies, at each pinned release, exactly the pinned
versions, and only if each one's manifest and implementation still hash to the recorded values
(else :class:`~spyre_adapters.errors.LockError`; nothing is applied). Installing a newer build
of an adapter distribution keeps a lock working as long as the pinned versions are still
installed unchanged: versions ship side by side and a released version never changes.

:func:`check_lock` compares a lock with what is installed. Its findings:

- ``stale`` (fails): resolving the release now gives another set for a reason other than a
  newer version: an adapter added or dropped, or a pinned version that is not installed;
- ``tampered`` (fails): a pinned manifest or implementation no longer hashes to the value
  recorded;
- ``superseded`` (reported, does not fail): a newer installed version is what resolution picks
  at that release now, like ``pip list --outdated``; move the pin with
  ``spyre-adapters pin --upgrade NAME``;
- ``provider`` (reported, does not fail): the pinned version, unchanged, now comes from another
  distribution or distribution version (an upgrade that kept it).

Writes are atomic (a temporary file in the same folder, then ``os.replace``); pinning a release
keeps the other releases' entries. A lock of schema 1 (older spyre-adapters, other hashes) is
refused with the command that re-pins it.

This module pins (:func:`pin`, :func:`upgrade`) and is the public face of locks; the data model
is in :mod:`spyre_adapters._lock_model`, checking in :mod:`spyre_adapters._lock_check`, reading
and writing the file in :mod:`spyre_adapters._lock_file`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

from packaging.version import Version

from spyre_adapters._lock_check import FAILING_FINDINGS, LockFinding, check_lock, pinned_manifests
from spyre_adapters._lock_file import (
    dump_lock,
    old_schema_releases,
    parse_lock,
    read_lock,
    unwritable,
    write_lock,
)
from spyre_adapters._lock_model import (
    DEFAULT_LOCK_FILE,
    LOCK_SCHEMA_VERSION,
    Lock,
    LockEntry,
    PinnedAdapter,
    lock_release,
    manifest_sha256,
)
from spyre_adapters.errors import UnknownAdapterError
from spyre_adapters.implementation import (
    implementation_sha256,
    implementation_sources,
    one_installation,
    provider,
)
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import ReleaseLike

__all__ = [
    "DEFAULT_LOCK_FILE",
    "FAILING_FINDINGS",
    "LOCK_SCHEMA_VERSION",
    "Lock",
    "LockEntry",
    "LockFinding",
    "PinMove",
    "PinnedAdapter",
    "check_lock",
    "dump_lock",
    "implementation_sha256",
    "implementation_sources",
    "manifest_sha256",
    "old_schema_releases",
    "parse_lock",
    "pin",
    "pinned_manifests",
    "read_lock",
    "unwritable",
    "upgrade",
    "write_lock",
]


@dataclass(frozen=True)
class PinMove:
    """What ``upgrade`` did to one release's pin of an adapter (``None``: no pin)."""

    release: str
    name: str
    before: Version | None
    after: Version | None


def _pinned(manifest: Manifest, registry: Registry) -> PinnedAdapter:
    dist = provider(manifest, registry)
    return PinnedAdapter(
        manifest.name,
        manifest.version,
        manifest_sha256(manifest),
        implementation_sha256(manifest),
        dist.name if dist is not None else None,
        dist.version if dist is not None else None,
    )


def pin(
    registry: Registry,
    stack: str | os.PathLike[str] | ReleaseLike,
    *,
    auto_retire: bool = True,
    lock: Lock | None = None,
) -> Lock:
    """Resolve the adapters for ``stack`` and return ``lock`` (or a new lock) with that release's
    entry written (other releases kept)."""
    lifecycle = Lifecycle(registry, auto_retire=auto_retire)
    release = lifecycle.release(stack)
    with one_installation():
        adapters = tuple(
            _pinned(m, registry) for m in sorted(lifecycle.resolve(release), key=lambda m: m.name)
        )
    entry = LockEntry(release.name, auto_retire, adapters)
    return (lock or Lock()).with_entry(entry)


def upgrade(
    lock: Lock,
    registry: Registry,
    name: str,
    releases: Iterable[str | os.PathLike[str] | ReleaseLike] | None = None,
) -> tuple[Lock, list[PinMove]]:
    """Move the pin of adapter ``name`` to what resolution gives now, in every release of the
    lock (or in ``releases``), leaving every other pin as it is. Returns the new lock and one
    :class:`PinMove` per release looked at. ``name`` must be installed or pinned
    (:class:`~spyre_adapters.errors.UnknownAdapterError` otherwise)."""
    pinned_anywhere = any(e.get(name) is not None for e in lock.entries.values())
    if name not in registry and not pinned_anywhere:
        raise UnknownAdapterError(name, None, registry.names())
    specs = sorted(lock.entries) if releases is None else list(releases)
    moves: list[PinMove] = []
    for spec in specs:
        release = lock_release(lock, Lifecycle(registry), spec)
        entry = lock.entry(release.name)
        lifecycle = Lifecycle(registry, auto_retire=entry.auto_retire)
        now = next((m for m in lifecycle.resolve(release) if m.name == name), None)
        before = entry.get(name)
        others = [p for p in entry.adapters if p.name != name]
        if now is not None:
            others.append(
                before
                if before is not None and before.version == now.version
                else _pinned(now, registry)
            )
        adapters = tuple(sorted(others, key=lambda p: p.name))
        lock = lock.with_entry(replace(entry, adapters=adapters))
        moves.append(
            PinMove(
                release.name,
                name,
                None if before is None else before.version,
                None if now is None else now.version,
            )
        )
    return lock, moves
