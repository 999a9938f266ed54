"""Finding a module's spec without running any module.

``importlib.util.find_spec("a.b.c")`` imports ``a.b`` first, and so whatever ``a.b`` imports
(for an adapter implementation: torch). :func:`locate_module` asks only the finders: the top
package's spec comes from ``sys.meta_path`` (an editable install's finder included), each
submodule's from the folders of its parent's spec.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__all__ = ["locate_module", "module_file"]


def locate_module(module_name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``module_name`` (``None`` when it is not found, or names an attribute of a
    module rather than a module), found without importing it or its parents."""
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return getattr(loaded, "__spec__", None)
    parent, _, _ = module_name.rpartition(".")
    try:
        if not parent:
            return importlib.util.find_spec(module_name)
        outer = locate_module(parent)
        locations = outer.submodule_search_locations if outer is not None else None
        if locations is None:
            return None  # the parent is a module, not a package
        return importlib.machinery.PathFinder.find_spec(module_name, list(locations))
    except (ImportError, ValueError):
        return None


def module_file(module_name: str) -> Path | None:
    """The source file of ``module_name`` (a loaded module's ``__file__``, else its spec's
    origin), when it is a file."""
    module = sys.modules.get(module_name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if origin is None:
        spec = locate_module(module_name)
        origin = spec.origin if spec is not None else None
    if origin is None or not Path(origin).is_file():
        return None
    return Path(origin)
