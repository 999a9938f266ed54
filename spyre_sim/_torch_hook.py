"""Registration of the device once torch is imported (``import spyre_sim`` does not load torch).

``import spyre_sim`` registers the ``spyre`` device. When torch is already imported that happens
at once; otherwise :func:`register_when_torch_imports` puts a finder on ``sys.meta_path`` that
waits for the first ``import torch`` of the process, lets torch finish importing, registers the
device, and removes itself. So a process that only reads the stack catalogue (the
``spyre-adapters`` commands that run no model) never pays for torch, and ``import spyre_sim;
import torch`` registers the device as ``import torch, spyre_sim`` does.

When torch is first imported by a module of this package (``import spyre_sim.numerics`` before
torch), registering then would run the device's modules while that one is half-imported: the
finder also watches the imports of ``spyre_sim.*`` and registers when the outermost one ends.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

__all__ = ["register_when_torch_imports"]

_TORCH = "torch"
_PACKAGE = "spyre_sim."
_lock = threading.RLock()


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loaders of ``torch`` and of this package's modules so
    that the device registers once torch is imported and no module of the package is midway."""

    def __init__(self) -> None:
        self.depth = 0  # modules of this package being executed now

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        ours = fullname.startswith(_PACKAGE)
        if fullname != _TORCH and not ours:
            return None
        spec = None
        for finder in list(sys.meta_path):  # the other finders: the spec they give
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            if ours:
                self.depth += 1
            try:
                execute(module)
            finally:
                if ours:
                    self.depth -= 1
            self.settle()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def settle(self) -> None:
        """Register the device if torch is imported and no module of the package is midway."""
        if self.depth or _TORCH not in sys.modules:
            return
        with _lock:
            if self not in sys.meta_path:
                return
            sys.meta_path.remove(self)
        _register()


def _register() -> None:
    from spyre_sim.device import register

    register()


def register_when_torch_imports() -> None:
    """Register the device now if torch is imported, else right after torch is (once)."""
    if _TORCH in sys.modules:
        _register()
        return
    with _lock:
        if not any(isinstance(f, _AfterTorch) for f in sys.meta_path):
            sys.meta_path.insert(0, _AfterTorch())
