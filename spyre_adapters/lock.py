"""Pins: a lock file recording, per stack release, the exact adapter set to apply.

Format (TOML, default file name ``spyre-adapters.lock``)::

    # written by `spyre-adapters pin`; verify with `spyre-adapters check`
    schema_version = 1

    [releases."2026.05"]
    auto_retire = true
    adapters = [
      { name = "rope-rotation", version = "1.0", manifest_sha256 = "<64 hex>", implementation_sha256 = "<64 hex>" },
    ]

``manifest_sha256`` hashes the manifest file's bytes, ``implementation_sha256`` the source of
the entry point's module together with every module of the same top-level package that it
imports, directly or through each other (found statically from their ``import`` statements), so
an edit to a private helper module shared by several adapters is caught too. A lock is **stale** when resolving the release now would give a
different set (an adapter added, dropped, or at another version) and **tampered** when a pinned
adapter's manifest or implementation no longer hashes to the recorded value. Writes are atomic
(a temporary file in the same folder, then ``os.replace``); pinning a release keeps the other
releases' entries.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from spyre_adapters.errors import LockError, Problem, UnknownAdapterError
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import ReleaseLike

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_LOCK_FILE",
    "LOCK_SCHEMA_VERSION",
    "Lock",
    "LockEntry",
    "LockFinding",
    "PinnedAdapter",
    "check_lock",
    "dump_lock",
    "implementation_sha256",
    "manifest_sha256",
    "pin",
    "parse_lock",
    "pinned_manifests",
    "read_lock",
    "write_lock",
]

LOCK_SCHEMA_VERSION = 1
DEFAULT_LOCK_FILE = "spyre-adapters.lock"
_NO_FILE = "no-source-file"


@dataclass(frozen=True)
class PinnedAdapter:
    """One adapter version pinned for a release, with the hashes it was pinned with."""

    name: str
    version: Version
    manifest_sha256: str
    implementation_sha256: str


@dataclass(frozen=True)
class LockEntry:
    """The pinned adapter set of one release."""

    release: str
    auto_retire: bool
    adapters: tuple[PinnedAdapter, ...]


@dataclass(frozen=True)
class Lock:
    """A lock file's content: one entry per release name. ``source`` is the file, if any."""

    entries: Mapping[str, LockEntry] = field(default_factory=dict)
    source: str = ""

    def entry(self, release: str) -> LockEntry:
        """The entry for ``release``; :class:`LockError` when the lock has none."""
        try:
            return self.entries[release]
        except KeyError:
            pinned = ", ".join(sorted(self.entries)) or "none"
            raise LockError(
                [
                    Problem(
                        self.source or "lock",
                        f'releases."{release}"',
                        f"no adapters are pinned for stack {release} (pinned: {pinned}); run "
                        f"`spyre-adapters pin --stack {release}`",
                    )
                ]
            ) from None

    def with_entry(self, entry: LockEntry) -> Lock:
        """A copy with ``entry`` added or replaced."""
        return Lock({**self.entries, entry.release: entry}, self.source)


@dataclass(frozen=True)
class LockFinding:
    """Why a lock entry does not match the installed adapters.

    ``kind`` is ``"stale"`` (resolution differs) or ``"tampered"`` (a hash differs).
    """

    release: str
    adapter: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f'releases."{self.release}" {self.adapter}: {self.kind}: {self.message}'


def _sha256_file(path: Path | None) -> str:
    if path is None:
        return _NO_FILE
    return hashlib.sha256(path.read_bytes()).hexdigest()


def implementation_sha256(manifest: Manifest) -> str:
    """sha256 of the implementation: the entry point's module and the modules of its own
    top-level package that it imports, transitively (see the module docstring)."""
    entry = manifest.implementation_file()
    if entry is None:
        return _NO_FILE
    module_name = manifest.entry_point.partition(":")[0]
    digest = hashlib.sha256()
    for name, path in implementation_sources(module_name, entry):
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def implementation_sources(module_name: str, path: Path) -> list[tuple[str, Path]]:
    """``(module name, source file)`` of ``module_name`` and of every module of its top-level
    package reachable through ``import`` statements, sorted by name."""
    top = module_name.partition(".")[0]
    found: dict[str, Path] = {module_name: path}
    pending = [(module_name, path)]
    while pending:
        name, source = pending.pop()
        package = name if source.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(source, package):
            if imported.partition(".")[0] != top or imported in found:
                continue
            origin = _source_of(imported)
            if origin is not None:
                found[imported] = origin
                pending.append((imported, origin))
    return sorted(found.items())


def _imports(source: Path, package: str) -> set[str]:
    """Absolute names of the modules a source file imports (``from X import y`` yields
    ``X.y`` when that is a module and ``X`` otherwise; see :func:`_source_of`)."""
    tree = ast.parse(source.read_bytes(), filename=str(source))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            candidates = [f"{base}.{alias.name}" for alias in node.names]
            # only the own package's candidates: find_spec imports a candidate's parents
            # (``from transformers.x import y`` would import Transformers)
            own = [c for c in candidates if c.partition(".")[0] == package.partition(".")[0]]
            names.update(c for c in own if _source_of(c) is not None)
            names.add(base)
    return names


def _source_of(module_name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py") or not Path(origin).is_file():
        return None
    return Path(origin)


def manifest_sha256(manifest: Manifest) -> str:
    """sha256 of the manifest file (as read at load time; re-read when not recorded)."""
    if manifest.sha256:
        return manifest.sha256
    return _sha256_file(Path(manifest.source) if manifest.source else None)


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
        PinnedAdapter(m.name, m.version, manifest_sha256(m), implementation_sha256(m))
        for m in sorted(lifecycle.resolve(release), key=lambda m: m.name)
    )
    entry = LockEntry(release.name, auto_retire, adapters)
    return (lock or Lock()).with_entry(entry)


def check_lock(
    lock: Lock,
    registry: Registry,
    releases: Iterable[str | os.PathLike[str] | ReleaseLike] | None = None,
) -> list[LockFinding]:
    """Every way the lock's entries differ from what is installed: all entries, or those of
    ``releases`` (names, release files or release objects; a user release file must be given
    here for its entry to be re-resolved)."""
    findings: list[LockFinding] = []
    specs = sorted(lock.entries) if releases is None else list(releases)
    for spec in specs:
        release = Lifecycle(registry).release(spec)
        release_name = release.name
        entry = lock.entry(release_name)
        lifecycle = Lifecycle(registry, auto_retire=entry.auto_retire)
        resolved = {m.name: m for m in lifecycle.resolve(release)}
        pinned = {p.name: p for p in entry.adapters}
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
                        f"the lock pins {name} {then.version}, which resolution no longer applies",
                    )
                )
            elif now is not None and now.version != then.version:
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
                f"pinned version {pinned.version} is not installed",
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
    return findings


def pinned_manifests(lock: Lock, registry: Registry, release: str) -> list[Manifest]:
    """Exactly the manifests pinned for ``release``, in application order; :class:`LockError`
    when the release is not pinned, or a pinned adapter is missing or tampered."""
    entry = lock.entry(release)
    problems = []
    manifests = []
    for pinned in entry.adapters:
        findings = _tamper_findings(release, pinned, registry)
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
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise LockError([Problem(where, "", f"cannot be read: {exc}")]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LockError([Problem(where, "", f"is not valid TOML: {exc}")]) from exc
    return parse_lock(data, where=where)


def parse_lock(data: Mapping[str, Any], *, where: str) -> Lock:
    """Validate a parsed lock document."""
    problems: list[Problem] = []
    for key in data:
        if key not in ("schema_version", "releases"):
            problems.append(Problem(where, key, "unknown key (expected schema_version, releases)"))
    if data.get("schema_version") != LOCK_SCHEMA_VERSION:
        problems.append(
            Problem(
                where,
                "schema_version",
                f"expected {LOCK_SCHEMA_VERSION}, got {data.get('schema_version')!r}",
            )
        )
    releases = data.get("releases", {})
    if not isinstance(releases, dict):
        problems.append(Problem(where, "releases", "expected a table of releases"))
        releases = {}
    entries: dict[str, LockEntry] = {}
    for release, body in releases.items():
        key = f'releases."{release}"'
        if not isinstance(body, dict):
            problems.append(Problem(where, key, "expected a table"))
            continue
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
        for index, item in enumerate(adapters):
            item_key = f"{key}.adapters[{index}]"
            found = _pinned_problems(item, where, item_key)
            problems.extend(found)
            if not found:
                pinned.append(
                    PinnedAdapter(
                        item["name"],
                        Version(item["version"]),
                        item["manifest_sha256"],
                        item["implementation_sha256"],
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
    expected = ("name", "version", "manifest_sha256", "implementation_sha256")
    for name in item:
        if name not in expected:
            problems.append(Problem(where, f"{key}.{name}", "unknown key"))
    for name in expected:
        if not isinstance(item.get(name), str):
            problems.append(
                Problem(where, f"{key}.{name}", f"expected a string, got {item.get(name)!r}")
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


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a valid TOML basic string


def dump_lock(lock: Lock) -> str:
    """The TOML text of a lock (entries sorted by release version, adapters by name)."""
    lines = [
        "# spyre-adapters lock file: written by `spyre-adapters pin`; verify with",
        "# `spyre-adapters check`. Do not edit by hand: re-pin instead.",
        f"schema_version = {LOCK_SCHEMA_VERSION}",
    ]
    for release in sorted(lock.entries, key=_release_sort_key):
        entry = lock.entries[release]
        lines += [
            "",
            f"[releases.{_q(release)}]",
            f"auto_retire = {'true' if entry.auto_retire else 'false'}",
        ]
        lines.append("adapters = [")
        for p in sorted(entry.adapters, key=lambda p: p.name):
            lines.append(
                f"  {{ name = {_q(p.name)}, version = {_q(str(p.version))}, "
                f"manifest_sha256 = {_q(p.manifest_sha256)}, "
                f"implementation_sha256 = {_q(p.implementation_sha256)} }},"
            )
        lines.append("]")
    return "\n".join(lines) + "\n"


def _release_sort_key(name: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(name))
    except InvalidVersion:
        return (1, name)


def write_lock(lock: Lock, path: Path | str) -> None:
    """Write ``lock`` to ``path`` atomically (temporary file + ``os.replace``)."""
    target = Path(path)
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
