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
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w
from packaging.version import InvalidVersion, Version

from spyre_adapters.errors import (
    LockError,
    Problem,
    UnknownAdapterError,
    UnknownReleaseError,
)
from spyre_adapters.implementation import (
    implementation_sha256,
    implementation_sources,
    provider,
)
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import ReleaseLike
from spyre_sim.problems import read_toml_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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

LOCK_SCHEMA_VERSION = 2
DEFAULT_LOCK_FILE = "spyre-adapters.lock"
#: Finding kinds that make a lock fail ``check``; the others are reported only.
FAILING_FINDINGS = frozenset({"stale", "tampered"})
_NO_FILE = "no-source-file"
_RELEASE_KEYS = ("auto_retire", "adapters")
_REQUIRED = ("name", "version", "manifest_sha256", "implementation_sha256")
_OPTIONAL = ("distribution", "distribution_version")


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


@dataclass(frozen=True)
class LockFinding:
    """How a lock entry differs from the installed adapters.

    ``kind``: ``"stale"`` or ``"tampered"`` (the lock fails ``check``), ``"superseded"`` or
    ``"provider"`` (reported only; see the module docstring). ``newer`` is the version that
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


@dataclass(frozen=True)
class PinMove:
    """What ``upgrade`` did to one release's pin of an adapter (``None``: no pin)."""

    release: str
    name: str
    before: Version | None
    after: Version | None


def _sha256_file(path: Path | None) -> str:
    if path is None:
        return _NO_FILE
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_sha256(manifest: Manifest) -> str:
    """sha256 of the manifest file (as read at load time; re-read when not recorded)."""
    if manifest.sha256:
        return manifest.sha256
    return _sha256_file(Path(manifest.source) if manifest.source else None)


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
    adapters = tuple(
        _pinned(m, registry) for m in sorted(lifecycle.resolve(release), key=lambda m: m.name)
    )
    entry = LockEntry(release.name, auto_retire, adapters)
    return (lock or Lock()).with_entry(entry)


def _lock_release(
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
        release = _lock_release(lock, Lifecycle(registry), spec)
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


def check_lock(
    lock: Lock,
    registry: Registry,
    releases: Iterable[str | os.PathLike[str] | ReleaseLike] | None = None,
) -> list[LockFinding]:
    """Every way the lock's entries differ from what is installed (module docstring): all
    entries, or those of ``releases`` (names, release files or release objects; a user release
    file must be given here for its entry to be re-resolved). A table for a release the
    catalogue does not know is a :class:`LockError` naming the lock file."""
    findings: list[LockFinding] = []
    specs = sorted(lock.entries) if releases is None else list(releases)
    for spec in specs:
        if releases is None:
            release = _lock_release(lock, Lifecycle(registry), spec)
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


# -- reading and writing --------------------------------------------------------------------------
def read_lock(path: Path | str) -> Lock:
    """Read and validate a lock file; :class:`LockError` lists every problem."""
    where = str(path)
    _, data, problems = read_toml_file(Path(path), where)
    if data is None:
        raise LockError(problems)
    return parse_lock(data, where=where)


def old_schema_releases(path: Path | str) -> list[str] | None:
    """The release tables of a schema 1 lock at ``path`` (which ``pin`` replaces), or ``None``
    when ``path`` is not a readable schema 1 lock."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if data.get("schema_version") != 1:
        return None
    releases = data.get("releases")
    return sorted(releases) if isinstance(releases, dict) else []


def parse_lock(data: Mapping[str, Any], *, where: str) -> Lock:
    """Validate a parsed lock document: every problem (unknown keys, wrong types, an adapter
    pinned twice in one release, two tables naming the same release) in one :class:`LockError`."""
    problems: list[Problem] = []
    for key in data:
        if key not in ("schema_version", "releases"):
            problems.append(Problem(where, key, "unknown key (expected schema_version, releases)"))
    schema = data.get("schema_version")
    if schema == 1:
        problems.append(
            Problem(
                where,
                "schema_version",
                "this lock was written by an older spyre-adapters (schema 1, whose hashes cover "
                "other files); re-pin it: `spyre-adapters pin --stack R [--stack R2 ...]` "
                "replaces it",
            )
        )
    elif schema != LOCK_SCHEMA_VERSION:
        problems.append(
            Problem(where, "schema_version", f"expected {LOCK_SCHEMA_VERSION}, got {schema!r}")
        )
    releases = data.get("releases", {})
    if not isinstance(releases, dict):
        problems.append(Problem(where, "releases", "expected a table of releases"))
        releases = {}
    entries: dict[str, LockEntry] = {}
    seen_versions: dict[Version, str] = {}
    for release, body in releases.items():
        key = f'releases."{release}"'
        if not isinstance(body, dict):
            problems.append(Problem(where, key, "expected a table"))
            continue
        try:
            as_version = Version(release)
        except InvalidVersion:
            pass
        else:
            if as_version in seen_versions:
                problems.append(
                    Problem(
                        where,
                        key,
                        f'names the same release as releases."{seen_versions[as_version]}"; '
                        f"keep one table",
                    )
                )
            seen_versions[as_version] = release
        for unknown in body:
            if unknown not in _RELEASE_KEYS:
                problems.append(
                    Problem(
                        where, f"{key}.{unknown}", "unknown key (expected auto_retire, adapters)"
                    )
                )
        auto_retire = body.get("auto_retire", True)
        if not isinstance(auto_retire, bool):
            problems.append(
                Problem(where, f"{key}.auto_retire", f"expected true or false, got {auto_retire!r}")
            )
        adapters = body.get("adapters", [])
        if not isinstance(adapters, list):
            problems.append(Problem(where, f"{key}.adapters", "expected an array of tables"))
            adapters = []
        pinned: list[PinnedAdapter] = []
        first: dict[str, int] = {}
        for index, item in enumerate(adapters):
            item_key = f"{key}.adapters[{index}]"
            found = _pinned_problems(item, where, item_key)
            problems.extend(found)
            if found:
                continue
            name = item["name"]
            if name in first:
                problems.append(
                    Problem(
                        where,
                        f"{item_key}.name",
                        f"{name!r} is pinned twice in this release (also at "
                        f"adapters[{first[name]}]); a release pins one version of each adapter",
                    )
                )
                continue
            first[name] = index
            pinned.append(
                PinnedAdapter(
                    name,
                    Version(item["version"]),
                    item["manifest_sha256"],
                    item["implementation_sha256"],
                    item.get("distribution"),
                    item.get("distribution_version"),
                )
            )
        entries[release] = LockEntry(release, auto_retire is True, tuple(pinned))
    if problems:
        raise LockError(problems)
    return Lock(entries, where)


def _pinned_problems(item: object, where: str, key: str) -> list[Problem]:
    if not isinstance(item, dict):
        return [Problem(where, key, "expected a table")]
    problems = []
    for name in item:
        if name not in _REQUIRED and name not in _OPTIONAL:
            problems.append(
                Problem(
                    where,
                    f"{key}.{name}",
                    f"unknown key (expected {', '.join((*_REQUIRED, *_OPTIONAL))})",
                )
            )
    for name in _REQUIRED:
        if not isinstance(item.get(name), str):
            problems.append(
                Problem(where, f"{key}.{name}", f"expected a string, got {item.get(name)!r}")
            )
    for name in _OPTIONAL:
        if name in item and not isinstance(item[name], str):
            problems.append(
                Problem(where, f"{key}.{name}", f"expected a string, got {item[name]!r}")
            )
    version = item.get("version")
    if isinstance(version, str):
        try:
            Version(version)
        except InvalidVersion:
            problems.append(
                Problem(where, f"{key}.version", f"{version!r} is not a PEP 440 version")
            )
    return problems


_HEADER = (
    "# spyre-adapters lock file: written by `spyre-adapters pin`; verify with\n"
    "# `spyre-adapters check`. Do not edit by hand: re-pin instead.\n"
)


def _pin_document(p: PinnedAdapter) -> dict[str, str]:
    document = {
        "name": p.name,
        "version": str(p.version),
        "manifest_sha256": p.manifest_sha256,
        "implementation_sha256": p.implementation_sha256,
    }
    if p.distribution is not None:
        document["distribution"] = p.distribution
    if p.distribution_version is not None:
        document["distribution_version"] = p.distribution_version
    return document


def dump_lock(lock: Lock) -> str:
    """The TOML text of a lock (entries sorted by release version, adapters by name), written
    with ``tomli-w``."""
    releases: dict[str, Any] = {}
    for release in sorted(lock.entries, key=_release_sort_key):
        entry = lock.entries[release]
        releases[release] = {
            "auto_retire": entry.auto_retire,
            "adapters": [_pin_document(p) for p in sorted(entry.adapters, key=lambda p: p.name)],
        }
    document = {"schema_version": LOCK_SCHEMA_VERSION, "releases": releases}
    return _HEADER + tomli_w.dumps(document)


def _release_sort_key(name: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(name))
    except InvalidVersion:
        return (1, name)


def unwritable(path: Path | str) -> str | None:
    """Why a lock file cannot be written at ``path`` (its folder is missing, not a folder or
    not writable, or ``path`` is a folder), or ``None``: checked before any work is done."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        return f"{target} is a folder; name a file, e.g. {target / DEFAULT_LOCK_FILE}"
    if not folder.exists():
        return f"cannot write {target}: the folder {folder} does not exist (create it first)"
    if not folder.is_dir():
        return f"cannot write {target}: {folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot write {target}: the folder {folder} is not writable"
    return None


def write_lock(lock: Lock, path: Path | str) -> None:
    """Write ``lock`` to ``path`` atomically (temporary file + ``os.replace``); an unwritable
    path is a :class:`LockError` and leaves any existing file as it was."""
    target = Path(path)
    reason = unwritable(target)
    if reason is not None:
        raise LockError([Problem(str(target), "", reason)])
    text = dump_lock(lock)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
