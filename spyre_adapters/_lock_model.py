"""The lock data model: the :class:`Lock` a lock file holds (one :class:`LockEntry` per stack
release, each a set of :class:`PinnedAdapter`), the hashes a pin records
(:func:`manifest_sha256`; implementations: :mod:`spyre_adapters.implementation`) and the
release a lock table names. Documented, with the file format, in :mod:`spyre_adapters.lock`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from spyre_adapters.errors import LockError, Problem, UnknownReleaseError

if TYPE_CHECKING:
    from spyre_adapters.lifecycle import Lifecycle
    from spyre_adapters.manifest import Manifest
    from spyre_adapters.stacks import ReleaseLike

__all__ = [
    "DEFAULT_LOCK_FILE",
    "LOCK_SCHEMA_VERSION",
    "Lock",
    "LockEntry",
    "PinnedAdapter",
    "lock_release",
    "manifest_sha256",
]

LOCK_SCHEMA_VERSION = 2
DEFAULT_LOCK_FILE = "spyre-adapters.lock"
_NO_FILE = "no-source-file"


@dataclass(frozen=True)
class PinnedAdapter:
    """One adapter version pinned for a release, with the hashes it was pinned with and the
    distribution (name and version) that provided it, when one did."""

    name: str
    version: Version
    manifest_sha256: str
    implementation_sha256: str
    distribution: str | None = None
    distribution_version: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def provided_by(self) -> str:
        """``"dist version"`` or ``"-"``."""
        if self.distribution is None:
            return "-"
        return f"{self.distribution} {self.distribution_version or '?'}"


@dataclass(frozen=True)
class LockEntry:
    """The pinned adapter set of one release."""

    release: str
    auto_retire: bool
    adapters: tuple[PinnedAdapter, ...]

    def get(self, name: str) -> PinnedAdapter | None:
        """The pin of adapter ``name``, if any."""
        return next((p for p in self.adapters if p.name == name), None)


@dataclass(frozen=True)
class Lock:
    """A lock file's content: one entry per release name. ``source`` is the file, if any."""

    entries: Mapping[str, LockEntry] = field(default_factory=dict)
    source: str = ""

    def _problem(self, release: str, message: str) -> LockError:
        return LockError([Problem(self.source or "lock", f'releases."{release}"', message)])

    def entry(self, release: str) -> LockEntry:
        """The entry for ``release``; :class:`LockError` when the lock has none."""
        try:
            return self.entries[release]
        except KeyError:
            pinned = ", ".join(sorted(self.entries)) or "none"
            raise self._problem(
                release,
                f"no adapters are pinned for stack {release} (pinned: {pinned}); run "
                f"`spyre-adapters pin --stack {release}`",
            ) from None

    def with_entry(self, entry: LockEntry) -> Lock:
        """A copy with ``entry`` added or replaced."""
        return Lock({**self.entries, entry.release: entry}, self.source)


def _sha256_file(path: Path | None) -> str:
    if path is None:
        return _NO_FILE
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_sha256(manifest: Manifest) -> str:
    """sha256 of the manifest file (as read at load time; re-read when not recorded)."""
    if manifest.sha256:
        return manifest.sha256
    return _sha256_file(Path(manifest.source) if manifest.source else None)


def lock_release(
    lock: Lock, lifecycle: Lifecycle, spec: str | os.PathLike[str] | ReleaseLike
) -> ReleaseLike:
    """The release of a lock table's name; an unknown name is a problem of the lock file."""
    try:
        return lifecycle.release(spec)
    except UnknownReleaseError as exc:
        known = ", ".join(exc.known)
        raise lock._problem(
            str(spec),
            f"{exc.spec!r} is not a release of the stack catalogue (known: {known}); for a "
            f"release of your own, pass its file with --stack FILE, else remove the table or "
            f"re-pin",
        ) from None
