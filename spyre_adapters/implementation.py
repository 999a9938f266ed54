"""What an adapter version's implementation is: the files a lock hashes, and who provides them.

A manifest's ``entry_point`` names a module; the implementation of that version is

- for an adapter installed from a distribution (a wheel: ``pip install acme-adapters``), the
  files the distribution's ``RECORD`` lists for that module: the module's file, or, when the
  entry point names a package, every file under the package's folder (data files included,
  bytecode caches excluded). The files are read from disk, so an installed file edited after
  installation changes the hash. Nothing is found by reading imports: a version that needs a
  helper module ships it inside its own package (``acme_adapters/widget_v2/``), and each
  version lives in its own module or package, so installing a later build that adds a version
  leaves the earlier versions' hashes as they were;
- for the built-in adapters of ``spyre_adapters`` itself, and for code that no distribution
  records (a source checkout on ``sys.path``, an editable install): the entry module and every
  module of the entry module's own package that it imports, directly or through each other,
  found from their ``import`` statements. The built-ins are hashed this way however
  spyre-adapters is installed, so a lock means the same in a checkout and in a wheel; each
  released built-in version's hash is recorded in ``manifests/released.sha256`` and tested.

A built-in's Python file counts by its code (:func:`code_of`): its docstrings, comments and blank
lines are left out, so a documentation edit of the project's own adapters does not change what a
lock pins; any statement does. Other adapters' files count byte for byte, like their ``RECORD``.

:func:`provider` names the distribution (and its version) that provides an implementation:
the distribution whose files include the entry module, else the one whose entry point
registered the manifest.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import hashlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyre_adapters._locate import locate_module, module_file
from spyre_adapters._user_cache import parse_cache, source_tree
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry

__all__ = [
    "BUILTIN_PACKAGE",
    "Distribution",
    "implementation_files",
    "code_of",
    "comment_spans",
    "implementation_sha256",
    "implementation_sources",
    "provider",
]

#: The top-level package whose adapters are always hashed from source (see the docstring).
BUILTIN_PACKAGE = "spyre_adapters"
_NO_FILE = "no-source-file"


@dataclass(frozen=True)
class Distribution:
    """An installed distribution: ``name`` as its metadata spells it, and ``version``."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def _module_name(manifest: Manifest) -> str:
    return manifest.entry_point.partition(":")[0]


def _provides(dist: importlib.metadata.Distribution, top: str) -> bool:
    listed = dist.read_text("top_level.txt")
    if listed is not None and top in listed.split():
        return True
    return any(f.parts and f.parts[0] in (top, f"{top}.py") for f in dist.files or ())


@functools.lru_cache(maxsize=8)
def _packages(path: tuple[str, ...]) -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


@dataclass
class _Installation:
    """What :func:`one_installation` looks up once: the distribution providing each top-level
    package, and each distribution's name and version (by the identity of the distribution
    objects, which ``providers`` keeps alive)."""

    providers: dict[str, importlib.metadata.Distribution | None] = field(default_factory=dict)
    names: dict[int, Distribution] = field(default_factory=dict)
    #: module name -> its source file (``None``: not a module with a source file)
    sources: dict[str, Path | None] = field(default_factory=dict)
    #: manifest key -> implementation_sha256 of it
    hashes: dict[tuple[str, object], str] = field(default_factory=dict)


_INSTALLATION: contextvars.ContextVar[_Installation | None] = contextvars.ContextVar(
    "spyre_adapters_installation", default=None
)


@contextlib.contextmanager
def one_installation() -> Iterator[None]:
    """Inside the block the installed distributions are taken not to change: which one
    provides a top-level package is looked up once (``pin`` and ``check`` of a lock of 50
    built-ins asked it 50 times), and so is each one's name and version; source files are
    taken not to change either: where a module's source is, and each manifest's
    implementation hash, are computed once (``check`` of a lock pinning 51 adapters at two
    releases asked the file system some 2,500 times). Outside, every call looks again (an
    install or an edit in between is seen)."""
    outermost = _INSTALLATION.get() is None
    token = _INSTALLATION.set(_INSTALLATION.get() or _Installation())
    try:
        yield
    finally:
        _INSTALLATION.reset(token)
        if outermost:
            parse_cache().save()  # once for the batch (see implementation_sha256)


def _distribution_of(module_name: str) -> importlib.metadata.Distribution | None:
    """The installed distribution that provides ``module_name``'s top-level package."""
    top = module_name.partition(".")[0]
    installation = _INSTALLATION.get()
    if installation is None:
        return _look_up_distribution(top)
    if top not in installation.providers:
        installation.providers[top] = _look_up_distribution(top)
    return installation.providers[top]


def _look_up_distribution(top: str) -> importlib.metadata.Distribution | None:
    try:
        dist = importlib.metadata.distribution(top)  # names normalise: spyre_adapters
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None and _provides(dist, top):
        return dist
    for name in _packages(tuple(sys.path)).get(top, []):
        try:
            return importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - raced uninstall
            continue
    return None


def _named(dist: importlib.metadata.Distribution) -> Distribution:
    """``dist``'s name and version. Each read parses its METADATA file (an e-mail parser:
    most of what ``pin`` spent naming 48 providers), so inside :func:`one_installation` it is
    read once per distribution."""
    installation = _INSTALLATION.get()
    if installation is None:
        return Distribution(dist.metadata["Name"], dist.version)
    key = id(dist)
    if key not in installation.names:
        metadata = dist.metadata
        installation.names[key] = Distribution(metadata["Name"], metadata["Version"])
    return installation.names[key]


def provider(manifest: Manifest, registry: Registry | None = None) -> Distribution | None:
    """The distribution providing ``manifest``'s implementation (see the module docstring)."""
    dist = _distribution_of(_module_name(manifest))
    if dist is not None:
        return _named(dist)
    if registry is not None:
        registered = registry.provider_of(manifest)
        if registered.distribution is not None and registered.version is not None:
            return Distribution(registered.distribution, registered.version)
    return None


def _recorded(dist: importlib.metadata.Distribution, origin: Path) -> list[tuple[str, Path]]:
    """The RECORD files of ``dist`` that make up the module at ``origin`` (empty when the
    distribution does not record that file, as in an editable install)."""
    origin = origin.resolve()
    package = origin.parent if origin.name == "__init__.py" else None
    chosen: list[tuple[str, Path]] = []
    found = False
    for entry in dist.files or ():
        if "__pycache__" in entry.parts or entry.suffix == ".pyc":
            continue
        if package is None and entry.name != origin.name:
            continue
        path = Path(str(dist.locate_file(entry))).resolve()
        if path == origin:
            found = True
            chosen.append((entry.as_posix(), path))
        elif package is not None and package in path.parents:
            chosen.append((entry.as_posix(), path))
    return sorted(chosen) if found else []


def implementation_files(manifest: Manifest) -> list[tuple[str, Path]]:
    """``(label, file)`` of every file hashed for ``manifest``'s implementation, sorted: RECORD
    paths for a distribution's files, module names for source files (module docstring)."""
    module_name = _module_name(manifest)
    origin = module_file(module_name)
    if origin is None:
        return []
    if module_name.partition(".")[0] != BUILTIN_PACKAGE:
        dist = _distribution_of(module_name)
        if dist is not None:
            recorded = _recorded(dist, origin)
            if recorded:
                return recorded
    return implementation_sources(module_name, origin)


def _file_digest(path: Path, code_only: bool) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        return _NO_FILE.encode()
    raw = hashlib.sha256(data).digest()
    if not (code_only and path.suffix == ".py"):
        return raw
    return _code_digest(raw, data)


# Parsing is what costs (a lock of 50 built-ins reads their shared modules many times): both
# memos are keyed by the file's bytes (their sha256), so an edited file is parsed again; the
# user's parse cache (spyre_adapters._user_cache) keeps their results across processes.
_CODE_DIGESTS: dict[bytes, bytes] = {}
_IMPORTS: dict[tuple[bytes, str], tuple[frozenset[str], tuple[str, ...]]] = {}


def _code_digest(raw: bytes, data: bytes) -> bytes:
    found = _CODE_DIGESTS.get(raw)
    if found is None:
        cache = parse_cache()
        kept = cache.lookup(raw.hex(), "code")
        if isinstance(kept, str):
            found = bytes.fromhex(kept)
        else:
            found = hashlib.sha256(code_of(data, _tree(raw, data))).digest()
            cache.put(raw.hex(), "code", found.hex())
        _CODE_DIGESTS[raw] = found
    return found


def _tree(raw: bytes, data: bytes) -> ast.Module | None:
    """The parsed source whose bytes hash to ``raw`` (``None`` when it does not parse)."""
    return source_tree(raw, data)


# Strings and comments of valid Python source, leftmost first: a ``#`` inside a string is not
# a comment, a quote inside a comment starts no string. Prefixes (r, b, f, u) need no case of
# their own: a backslash escapes the next character for where a string ends, raw or not.
_STRINGS_AND_COMMENTS = re.compile(
    "|".join(
        (
            r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""',
            r"'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''",
            r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"',
            r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'",
            r"(?P<comment>#[^\r\n]*)",
        )
    ),
    re.DOTALL,
)


def comment_spans(text: str) -> list[tuple[int, int, int, int]]:
    """``(row, col, end_row, end_col)`` of every comment of ``text`` (valid Python source), as
    :mod:`tokenize` gives its ``COMMENT`` tokens: rows from 1, counted at ``\\n``; columns in
    characters. One regular-expression pass: ``tokenize`` produces every token in Python code
    and was most of what ``pin`` and ``check`` spent hashing the built-ins."""
    spans: list[tuple[int, int, int, int]] = []
    row, row_start = 1, 0
    for match in _STRINGS_AND_COMMENTS.finditer(text):
        if match.lastgroup != "comment":
            continue
        start, end = match.span()
        row += text.count("\n", row_start, start)
        row_start = text.rfind("\n", 0, start) + 1
        spans.append((row, start - row_start, row, end - row_start))
    return spans


def _docstrings(tree: ast.Module) -> Iterator[ast.Expr]:
    """The docstring statements of the module and of every class and function in it. They
    are statements of statement bodies only, so expressions are never visited."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                pending.extend(
                    item
                    for item in value
                    if isinstance(item, (ast.stmt, ast.excepthandler, ast.match_case))
                )


def code_of(source: bytes, tree: ast.Module | None = None) -> bytes:
    """The code of a Python source, without what does not run: docstrings (of the module, its
    classes and functions), comments, trailing spaces and blank lines. Editing prose leaves an
    implementation's hash as it was; any change to a statement changes it. The same on every
    supported Python (only positions and comments are read, both stable). A file that does not
    parse is its bytes. ``tree``: ``source`` already parsed."""
    try:
        tree = ast.parse(source) if tree is None else tree
    except (SyntaxError, ValueError):
        return source
    text = source.decode("utf-8")
    if text.startswith("\ufeff"):  # tokenize's columns leave a byte-order mark out
        spans = _tokenized_comment_spans(source)
        if spans is None:
            return source
    else:
        spans = comment_spans(text)
    lines = text.splitlines()
    for first in _docstrings(tree):
        if first.end_lineno is not None and first.end_col_offset is not None:
            spans.append((first.lineno, first.col_offset, first.end_lineno, first.end_col_offset))
    # cut from the end so earlier positions stay valid
    for start_line, start_col, end_line, end_col in sorted(spans, reverse=True):
        head = lines[start_line - 1][:start_col]
        tail = lines[end_line - 1][end_col:]
        lines[start_line - 1 : end_line] = [head + tail]
    kept = [line.rstrip() for line in lines if line.strip()]
    return "\n".join(kept).encode("utf-8")


def _tokenized_comment_spans(source: bytes) -> list[tuple[int, int, int, int]] | None:
    import io
    import tokenize

    try:
        tokens = list(tokenize.tokenize(io.BytesIO(source).readline))
    except (SyntaxError, ValueError, tokenize.TokenError):
        return None
    return [(*t.start, *t.end) for t in tokens if t.type == tokenize.COMMENT]


def implementation_sha256(manifest: Manifest) -> str:
    """sha256 over ``(label, NUL, sha256 of the file)`` of every implementation file. For the
    built-ins, a Python file counts by its code (:func:`code_of`: docstrings and comments left
    out); any other adapter's files count byte for byte, as its distribution's ``RECORD``
    does, so an installed file edited in any way no longer matches a lock."""
    installation = _INSTALLATION.get()
    if installation is not None and manifest.key in installation.hashes:
        return installation.hashes[manifest.key]
    files = implementation_files(manifest)
    if not files:
        return _NO_FILE
    code_only = _module_name(manifest).partition(".")[0] == BUILTIN_PACKAGE
    digest = hashlib.sha256()
    for label, path in files:
        digest.update(label.encode() + b"\0" + _file_digest(path, code_only))
    if installation is None:
        parse_cache().save()
    else:  # inside one_installation the block's end writes the cache, once
        installation.hashes[manifest.key] = digest.hexdigest()
    return digest.hexdigest()


def _scope(module_name: str, path: Path) -> str:
    """The package whose modules count as part of ``module_name``'s implementation."""
    if path.name == "__init__.py":
        return module_name
    return module_name.rpartition(".")[0] or module_name


def implementation_sources(module_name: str, path: Path) -> list[tuple[str, Path]]:
    """``(module name, source file)`` of ``module_name`` and of every module of its own
    package reachable through ``import`` statements, sorted by name."""
    scope = _scope(module_name, path)
    found: dict[str, Path] = {module_name: path}
    pending = [(module_name, path)]
    while pending:
        name, source = pending.pop()
        package = name if source.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(source, package):
            inside = imported == scope or imported.startswith(scope + ".")
            if not inside or imported in found:
                continue
            origin = _source_of(imported)
            if origin is not None:
                found[imported] = origin
                pending.append((imported, origin))
    return sorted(found.items())


def _imports(source: Path, package: str) -> set[str]:
    """Absolute names of the modules a source file imports (``from X import y`` yields
    ``X.y`` when that is a module and ``X`` otherwise; see :func:`_source_of`)."""
    data = source.read_bytes()
    raw = hashlib.sha256(data).digest()
    parsed = _IMPORTS.get((raw, package))
    if parsed is None:
        parsed = _IMPORTS[(raw, package)] = _cached_imports(source, raw, data, package)
    names, own = parsed
    # whether ``X.y`` is a module is the file system's answer, asked each time
    return set(names) | {c for c in own if _source_of(c) is not None}


def _cached_imports(
    source: Path, raw: bytes, data: bytes, package: str
) -> tuple[frozenset[str], tuple[str, ...]]:
    """:func:`_parse_imports` of the file, from the user's parse cache when it has them."""
    cache, field = parse_cache(), f"imports:{package}"
    kept = cache.lookup(raw.hex(), field)
    if (
        isinstance(kept, list)
        and len(kept) == 2
        and all(isinstance(part, list) and all(isinstance(n, str) for n in part) for part in kept)
    ):
        return frozenset(kept[0]), tuple(kept[1])
    tree = _tree(raw, data)
    if tree is None:
        tree = ast.parse(data, filename=str(source))  # raises the SyntaxError, with the file
    names, own = _parse_imports(tree, package)
    cache.put(raw.hex(), field, [sorted(names), list(own)])
    return names, own


def _parse_imports(tree: ast.Module, package: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The imported names that count whatever exists, and the ``from X import y`` candidates
    ``X.y`` of the own package, which count where they are modules."""
    names: set[str] = set()
    own: list[str] = []
    top = package.partition(".")[0]
    for node in _statements(tree):
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
            own.extend(c for c in candidates if c.partition(".")[0] == top)
            names.add(base)
    return frozenset(names), tuple(own)


def _statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every statement of ``tree``, nested ones included (an import is a statement: the
    expressions, most of a tree's nodes, need no visit)."""
    pending: list[ast.stmt] = list(reversed(tree.body))
    while pending:
        node = pending.pop()
        yield node
        blocks: list[list[Any]] = [
            getattr(node, name, []) for name in ("body", "orelse", "finalbody", "handlers")
        ]
        blocks.extend([case.body for case in getattr(node, "cases", [])])  # match statements
        for block in reversed(blocks):
            for child in reversed(block):
                if isinstance(child, ast.ExceptHandler):
                    pending.extend(reversed(child.body))
                elif isinstance(child, ast.stmt):
                    pending.append(child)


def _source_of(module_name: str) -> Path | None:
    installation = _INSTALLATION.get()
    if installation is None:
        return _find_source(module_name)
    if module_name not in installation.sources:
        installation.sources[module_name] = _find_source(module_name)
    return installation.sources[module_name]


def _find_source(module_name: str) -> Path | None:
    spec = locate_module(module_name)
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py") or not Path(origin).is_file():
        return None
    return Path(origin)
