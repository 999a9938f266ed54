"""The user cache of spyre-adapters: where it is, and the parse results kept in it.

``$SPYRE_ADAPTERS_CACHE_DIR``, else ``$XDG_CACHE_HOME/spyre-adapters``, else
``~/.cache/spyre-adapters`` (a folder under the temporary directory when the user has no home
folder). ``SPYRE_ADAPTERS_CACHE_DIR=off`` (or empty) turns the persistent
parse cache off; nothing the project computes depends on it being there.

:class:`ParseCache` keeps, across processes, what hashing an adapter's implementation costs: a
Python file's code digest (:func:`spyre_adapters.implementation.code_of`) and the modules it
imports. Parsing and walking the syntax trees of some 80 adapter modules is a quarter of what
``pin`` and ``check`` spend. Entries are keyed by the sha256 of the file's bytes and by the
Python version that parsed them, so an edited file is a miss, never a stale answer; the file is
written atomically (a temporary file renamed over it), and an unreadable, corrupt or unwritable
cache is the same as none.

Behind the user's entries, the package ships the same results for its own files as released
(:data:`SEED`, ``parse-seed.json``, written by ``python .ci/parse_seed.py`` and checked by a
test against a fresh computation): the first ``list``, ``pin`` or ``check`` after an install
parses nothing either. Seed entries are keyed by the file's sha256 alone: code digests, import
lists and top-level names read positions, comments and names only, the same on every supported
Python; an edited file misses and is parsed as before.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "SEED", "ParseCache", "cache_root", "parse_cache", "source_tree"]

CACHE_ENV = "SPYRE_ADAPTERS_CACHE_DIR"
#: The parse results of the package's own files, shipped with it (see the module docstring).
SEED = Path(__file__).with_name("parse-seed.json")
_OFF = {"", "off", "0", "none", "false"}
#: Entries kept: the newest first used; a checkout's adapters are under 200 files.
_LIMIT = 4000
#: Bump when what an entry holds, or how it is computed, changes.
_FORMAT = 1


def _chosen() -> tuple[bool, str | None]:
    """Whether ``$SPYRE_ADAPTERS_CACHE_DIR`` leaves the parse cache on, and the folder it
    names (``None``: unset, or set to turn the cache off)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is None:
        return True, None
    off = chosen.strip().lower() in _OFF
    return not off, None if off else chosen


def cache_root() -> Path:
    """The user cache folder of spyre-adapters (see the module docstring); not created."""
    folder = _chosen()[1]
    if folder is not None:
        return Path(folder).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home folder to be found (no $HOME, no password entry)
            base = str(Path(tempfile.gettempdir()) / f"spyre-adapters-cache-{_user()}")
    return Path(base) / "spyre-adapters"


def _user() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else os.environ.get("USERNAME", "user")


class ParseCache:
    """Parse results by file content (see the module docstring). ``get`` and ``put`` work in
    memory; ``save`` writes the file when something was added. ``seed``: a file of entries
    read (once, when first needed) where the cache has none, never written (default:
    :data:`SEED` as it is when the cache is made; ``None``: no seed)."""

    def __init__(self, path: Path | None, seed: bool | Path | None = True) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        self._seed_path = SEED if seed is True else seed or None
        self._seed: dict[str, dict[str, Any]] | None = None
        if path is not None:
            self._entries = self._read(path)

    def entries(self) -> dict[str, dict[str, Any]]:
        """The entries this process holds (read and added; not the seed's)."""
        return self._entries

    def _seeded(self) -> dict[str, dict[str, Any]]:
        if self._seed is None:
            self._seed = self._read(self._seed_path) if self._seed_path is not None else {}
        return self._seed

    @staticmethod
    def _read(path: Path) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, dict) or data.get("format") != _FORMAT:
            return {}
        return {k: v for k, v in entries.items() if isinstance(v, dict)}

    def get(self, key: str) -> dict[str, Any] | None:
        return self._entries.get(key)

    def lookup(self, key: str, field: str) -> Any:
        """``field`` of the entry ``key`` (``None`` when either is missing); callers check the
        value's type, since the file may have been written by anything."""
        entry = self._entries.get(key)
        if entry is not None and field in entry:
            return entry[field]
        seeded = self._seeded().get(key)
        return seeded.get(field) if seeded is not None else None

    def put(self, key: str, field: str, value: Any) -> None:
        """Record ``field`` of the entry ``key`` (a file's content digest)."""
        entry = self._entries.setdefault(key, {})
        if entry.get(field) != value:
            entry[field] = value
            self._dirty = True

    def save(self) -> None:
        """Write the cache if an entry was added (atomically; failures are ignored)."""
        if not self._dirty or self.path is None:
            return
        self._dirty = False
        entries = dict(list(self._entries.items())[-_LIMIT:])
        payload = json.dumps({"format": _FORMAT, "entries": entries}, separators=(",", ":"))
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".parse-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(payload)
                os.replace(tmp, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


_CACHES: dict[Path | None, ParseCache] = {}


def parse_cache() -> ParseCache:
    """The parse cache of this process for the current cache folder (an in-memory one when
    the persistent cache is off)."""
    impl = sys.implementation
    path = cache_root() / f"parse-{impl.cache_tag or impl.name}.json" if _chosen()[0] else None
    cache = _CACHES.get(path)
    if cache is None:
        cache = _CACHES[path] = ParseCache(path)
    return cache


_TREES: dict[bytes, ast.Module | None] = {}


def source_tree(digest: bytes, data: bytes) -> ast.Module | None:
    """The syntax tree of Python source ``data`` whose sha256 is ``digest``, parsed once per
    process whoever asks (the registry's entry-point check and the implementation hash read
    the same files); ``None`` when it does not parse."""
    if digest not in _TREES:
        try:
            _TREES[digest] = ast.parse(data)
        except (SyntaxError, ValueError):
            _TREES[digest] = None
    return _TREES[digest]
