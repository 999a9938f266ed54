"""The built-in adapters' plugin: entry point ``builtin`` in group ``spyre_adapters``.

It registers every manifest shipped in the package ``spyre_adapters.manifests`` (the top-level
``manifests/`` folder of the source tree) through the same hook third-party plugins implement,
so ``SPYRE_ADAPTERS_DISABLE=builtin`` turns the built-ins off like any other plugin.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from spyre_adapters.hookspecs import hookimpl

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry

__all__ = ["spyre_adapters_register"]


@hookimpl
def spyre_adapters_register(registry: Registry) -> None:
    """Register the manifests under ``spyre_adapters.manifests``."""
    registry.load_directory(files("spyre_adapters.manifests"))
