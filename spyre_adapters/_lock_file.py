"""The lock file: reading (:func:`read_lock`, validated by :func:`parse_lock`, every problem
at once), writing (:func:`dump_lock` with ``tomli-w``, :func:`write_lock` atomically, after
:func:`unwritable` says the path can take it) and recognising a lock of schema 1. The format is
documented in :mod:`spyre_adapters.lock`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w
from packaging.version import InvalidVersion, Version

from spyre_adapters._lock_model import (
    DEFAULT_LOCK_FILE,
    LOCK_SCHEMA_VERSION,
    Lock,
    LockEntry,
    PinnedAdapter,
)
from spyre_adapters.errors import LockError, Problem
from spyre_sim.problems import read_toml_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "dump_lock",
    "old_schema_releases",
    "parse_lock",
    "read_lock",
    "unwritable",
    "write_lock",
]

_RELEASE_KEYS = ("auto_retire", "adapters")
_REQUIRED = ("name", "version", "manifest_sha256", "implementation_sha256")
_OPTIONAL = ("distribution", "distribution_version")


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
