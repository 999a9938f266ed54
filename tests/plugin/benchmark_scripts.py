"""Load a script of ``benchmarks/`` as a module, for the tests of its functions (the folder is
not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (registered in ``sys.modules``, which
    dataclasses defined in the script look their module up in). The folder goes on
    ``sys.path``, as for a script run from it, so its imports of sibling helpers resolve."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
