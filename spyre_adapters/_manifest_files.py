"""Loading manifest files: one file, a list of files, or a manifests tree laid out as
``<name>/<version>.toml`` (:func:`load_manifests`), all or nothing: every problem of every file
(each file validated by :func:`spyre_adapters._manifest_parse.parse_manifest`, the layout, two
files declaring the same version) in one :class:`~spyre_adapters.errors.ManifestError`.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from spyre_adapters._manifest_model import Manifest
from spyre_adapters._manifest_parse import parse_manifest
from spyre_adapters._user_cache import parse_cache
from spyre_adapters.errors import ManifestError, Problem
from spyre_adapters.stacks import CatalogueLike
from spyre_sim.problems import read_toml, read_toml_file

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable

else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable

__all__ = ["load_manifest", "load_manifests"]


def _read(file: Traversable, where: str) -> tuple[dict[str, Any] | None, str, list[Problem]]:
    """The manifest document of ``file``, its sha256 and the problems of reading it. A parsed
    document is kept in the user's parse cache by the file's sha256 (JSON holds every value a
    manifest has; a document with other TOML values, such as dates, is not kept)."""
    try:
        raw = file.read_bytes()
    except OSError:
        return _read_parsed(file, where)
    digest = hashlib.sha256(raw).hexdigest()
    cache = parse_cache()
    kept = cache.lookup(digest, "toml")
    if isinstance(kept, dict):
        return kept, digest, []
    doc, problems = read_toml(raw, where)
    if doc is not None and _plain(doc):
        cache.put(digest, "toml", json.loads(json.dumps(doc)))  # a copy: doc is handed on
    return doc, digest, problems


def _read_parsed(file: Traversable, where: str) -> tuple[dict[str, Any] | None, str, list[Problem]]:
    raw, doc, problems = read_toml_file(file, where)
    digest = hashlib.sha256(raw).hexdigest() if raw or doc is not None else ""
    return doc, digest, problems


def _plain(value: Any) -> bool:
    """Whether ``value`` comes back from JSON as it is (strings, ints, bools, lists, tables;
    floats only when finite)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


def _layout_problems(
    manifest: Manifest, file: Traversable, folder: str, where: str
) -> list[Problem]:
    """Under a manifests tree, ``<name>/<version>.toml`` must agree with the content."""
    problems = []
    if folder != manifest.name:
        problems.append(
            Problem(
                where,
                "name",
                f"name {manifest.name!r} does not match the folder {folder!r} "
                f"(expected '<name>/<version>.toml')",
            )
        )
    stem = file.name.removesuffix(".toml")
    try:
        same_version = Version(stem) == manifest.version
    except InvalidVersion:
        same_version = False
    if not same_version:
        problems.append(
            Problem(
                where,
                "version",
                f"version {str(manifest.version)!r} does not match the file name {file.name!r} "
                f"(expected '<name>/<version>.toml')",
            )
        )
    return problems


def _tree_files(
    root: Traversable,
) -> tuple[list[tuple[Traversable, str | None]], list[Problem]]:
    """Every ``*.toml`` under ``root`` with its folder (``None`` for a file outside the
    ``<name>/<version>.toml`` layout: directly under ``root`` or deeper than one folder), and a
    problem for each file outside the layout (it is still read, so its own problems are
    reported too)."""
    files: list[tuple[Traversable, str | None]] = []
    stray: list[Traversable] = []
    for entry in root.iterdir():
        if entry.is_dir():
            for item in entry.iterdir():
                if item.is_file() and item.name.endswith(".toml"):
                    files.append((item, entry.name))
                elif item.is_dir():
                    stray.extend(_tomls_below(item))
        elif entry.is_file() and entry.name.endswith(".toml"):
            stray.append(entry)
    problems = [
        Problem(
            str(file),
            "",
            f"is outside the '<name>/<version>.toml' layout of the manifests folder {root}: "
            f"move it to {root}/<name>/<version>.toml (or out of the folder)",
        )
        for file in sorted(stray, key=str)
    ]
    files.extend((file, None) for file in stray)
    return sorted(files, key=lambda pair: str(pair[0])), problems


def _tomls_below(folder: Traversable) -> list[Traversable]:
    found: list[Traversable] = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found.extend(_tomls_below(entry))
        elif entry.is_file() and entry.name.endswith(".toml"):
            found.append(entry)
    return found


def load_manifest(
    path: Traversable | Path | str,
    catalogue: CatalogueLike,
    *,
    check_entry_point: bool = True,
    import_entry_point: bool = True,
) -> Manifest:
    """Load and validate one manifest file; raise :class:`ManifestError` with every problem."""
    return load_manifests(
        [path],
        catalogue,
        check_entry_point=check_entry_point,
        import_entry_point=import_entry_point,
    )[0]


def load_manifests(
    files: Iterable[Traversable | Path | str] | Traversable | Path | str,
    catalogue: CatalogueLike,
    *,
    check_entry_point: bool = True,
    import_entry_point: bool = True,
) -> list[Manifest]:
    """Load and validate manifests: a directory tree (``<name>/<version>.toml``) or files.

    All or nothing: when any file has a problem, :class:`ManifestError` lists the problems of
    every file and no manifest is returned. Two files declaring the same name and version are a
    problem too.

    ``import_entry_point=False`` checks each entry point without importing it (the module is
    found and binds the name), for processes that run no adapter: it keeps torch unloaded.
    """
    candidates: list[tuple[Traversable, str | None]]
    problems: list[Problem] = []
    if isinstance(files, (str, Path)) or not isinstance(files, Iterable):
        root = Path(files) if isinstance(files, str) else files
        if root.is_file():
            candidates = [(root, None)]
        else:
            candidates, problems = _tree_files(root)
    else:
        candidates = [(Path(f) if isinstance(f, str) else f, None) for f in files]
    manifests: list[Manifest] = []
    seen: dict[tuple[str, Version], str] = {}
    for file, folder in candidates:
        where = str(file)
        data, digest, read_problems = _read(file, where)
        if data is None:
            problems.extend(read_problems)
            continue
        manifest, found = parse_manifest(
            data,
            where=where,
            catalogue=catalogue,
            check_entry_point=check_entry_point,
            sha256=digest,
            import_entry_point=import_entry_point,
        )
        problems.extend(found)
        if manifest is None:
            continue
        if folder is not None:
            layout = _layout_problems(manifest, file, folder, where)
            if layout:
                problems.extend(layout)
                continue
        if manifest.key in seen:
            problems.append(
                Problem(
                    where,
                    "version",
                    f"adapter {manifest.name!r} version {manifest.version} is also declared in "
                    f"{seen[manifest.key]}",
                )
            )
            continue
        seen[manifest.key] = where
        manifests.append(manifest)
    parse_cache().save()
    if problems:
        raise ManifestError(problems)
    return manifests
