"""The pluggy hook through which adapter plugins register manifests.

Built-in and third-party adapters register the same way: a module named by an entry point in
group ``spyre_adapters`` implements :func:`spyre_adapters_register`. A minimal third-party
plugin (``pyproject.toml``: ``[project.entry-points.spyre_adapters] my_adapters =
"my_adapters.plugin"``)::

    from importlib.resources import files

    from spyre_adapters import hookimpl

    @hookimpl
    def spyre_adapters_register(registry):
        # manifests under my_adapters/manifests/<name>/<version>.toml
        registry.load_directory(files("my_adapters") / "manifests")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec", "spyre_adapters_register"]

#: The pluggy project name, which is also the entry-point group plugins ship in.
PROJECT_NAME = "spyre_adapters"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def spyre_adapters_register(registry: Registry) -> None:
    """Register adapter manifests with ``registry.add(manifest)`` or
    ``registry.load_directory(path)``.

    Called once per plugin while the registry is built. Raising (or registering an invalid
    manifest or a duplicate name+version) fails the whole build: no registry is returned.
    """
