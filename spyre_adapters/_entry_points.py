"""Adapter entry points (``package.module:object``): importing one, and checking one while a
manifest is validated, by importing it (is the object an adapter, and do its ops agree with the
manifest's ``[bridges]``?) or, for a process that runs no adapter, by finding its module
without importing it (see :func:`spyre_adapters.manifest.load_manifests`).

The checks return ``(key, message)`` problems of the manifest: ``entry_point`` or ``bridges``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spyre_adapters._locate import locate_module
from spyre_adapters._user_cache import parse_cache, source_tree

if TYPE_CHECKING:
    from spyre_adapters._manifest_model import Bridge

__all__ = ["binds_at_top_level", "entry_point_problems", "import_entry_point", "located_problems"]


def import_entry_point(entry_point: str) -> Any:
    """The object ``entry_point`` names, imported."""
    module_name, _, attr_path = entry_point.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj


def entry_point_problems(entry_point: str, bridges: Sequence[Bridge] = ()) -> list[tuple[str, str]]:
    """The problems of an entry point, found by importing it: it does not import, the object
    is not an adapter, or its op table differs from the manifest's ``bridges``."""
    from spyre_adapters.contract import Adapter  # imports torch: only when validating

    try:
        obj = import_entry_point(entry_point)
    except Exception as exc:  # any import-time failure of third-party code is a finding
        return [("entry_point", f"{entry_point!r} does not import: {type(exc).__name__}: {exc}")]
    if not isinstance(obj, Adapter):
        missing = [m for m in ("matches", "apply") if not callable(getattr(obj, m, None))]
        return [
            (
                "entry_point",
                f"{entry_point!r} is a {type(obj).__name__}, not an adapter: it lacks "
                f"{' and '.join(f'{m}()' for m in missing)} (see spyre_adapters.contract.Adapter)",
            )
        ]
    table = getattr(obj, "table", None)
    if bridges and isinstance(table, dict):
        declared = {b.op: b.candidate for b in bridges}
        if table != declared:
            return [
                (
                    "bridges",
                    f"the ops and candidates of {entry_point!r} ({table}) differ from the "
                    f"manifest's [bridges] ({declared})",
                )
            ]
    return []


def located_problems(entry_point: str) -> list[tuple[str, str]]:
    """The entry-point check of a process that runs no adapter: the module is found and binds
    the object's name at its top level, without importing the module (nor torch, which every
    implementation imports). Whether the object is an adapter is checked when it is loaded."""
    module_name, _, attr_path = entry_point.partition(":")
    attr = attr_path.split(".")[0]
    loaded = sys.modules.get(module_name)
    spec = None if loaded is not None else locate_module(module_name)
    if loaded is None and spec is None:
        return [
            (
                "entry_point",
                f"{entry_point!r} does not import: ModuleNotFoundError: "
                f"No module named {module_name!r}",
            )
        ]
    if loaded is not None:
        bound: bool | None = hasattr(loaded, attr)
    else:
        assert spec is not None
        bound = binds_at_top_level(spec.origin, attr)
    if bound is False:
        return [
            (
                "entry_point",
                f"{entry_point!r} does not import: AttributeError: module {module_name!r} has "
                f"no attribute {attr!r}",
            )
        ]
    return []


def binds_at_top_level(origin: str | None, name: str) -> bool | None:
    """Whether the Python source at ``origin`` binds ``name`` at module level (``None``: not
    known, e.g. no source file or a module ``__getattr__``)."""
    if origin is None or not origin.endswith(".py"):
        return None
    try:
        data = Path(origin).read_bytes()
    except OSError:
        return None
    names = _top_level_names(data, origin)
    if names is None or "__getattr__" in names:
        return None  # the import check of a process that loads the adapter says more
    return name in names


def _top_level_names(data: bytes, origin: str) -> frozenset[str] | None:
    """The names a source binds at module level (``None`` when it does not parse), from the
    user's parse cache when it has them."""
    digest = hashlib.sha256(data).digest()
    key = digest.hex()
    cache = parse_cache()
    kept = cache.lookup(key, "top-level")
    if isinstance(kept, list) and all(isinstance(n, str) for n in kept):
        return frozenset(kept)
    tree = source_tree(digest, data)
    if tree is None:
        return None
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    if isinstance(child, ast.ExceptHandler):
                        pending.extend(child.body)
                    else:
                        pending.append(child)
    cache.put(key, "top-level", sorted(names))
    return frozenset(names)
