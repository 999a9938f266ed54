"""What subcommands share: the registry and catalogue chosen by the global options.

Global options (before the subcommand): ``--manifests DIR`` (repeatable) registers the manifests
under DIR (``<name>/<version>.toml``) as an extra plugin named ``dir:DIR``, next to the installed
plugins; ``SPYRE_ADAPTERS_DISABLE=builtin`` leaves only those. Extension subcommands call
:func:`registry_for` with their parsed arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from spyre_adapters.hookspecs import hookimpl

if TYPE_CHECKING:  # imported where used: --version and --help build no registry
    from spyre_adapters.registry import Registry
    from spyre_adapters.stacks import CatalogueLike

__all__ = ["add_global_options", "catalogue_for", "registry_for", "unknown_family"]


class _DirectoryPlugin:
    """A plugin registering the manifests of one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.__name__ = f"dir:{root}"

    @hookimpl
    def spyre_adapters_register(self, registry: Registry) -> None:
        registry.load_directory(self.root)


def add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifests",
        metavar="DIR",
        action="append",
        default=[],
        help="also register the manifests under DIR (<name>/<version>.toml); repeatable",
    )


def catalogue_for(args: argparse.Namespace) -> CatalogueLike:
    """The stack catalogue (the built-in one)."""
    from spyre_adapters.stacks import default_catalogue

    return default_catalogue()


def registry_for(args: argparse.Namespace, *, runs_adapters: bool = True) -> Registry:
    """The registry of installed plugins plus ``--manifests`` folders (built once per run).

    ``runs_adapters=False`` (commands that run no model: ``list``, ``show``, ``audit``, ``pin``,
    ``check``) validates the manifests' entry points without importing them, so that such a
    command never imports torch; whether each names an adapter is checked where one runs."""
    from spyre_adapters.registry import Registry, build_registry

    cached = getattr(args, "_registry", None)
    if isinstance(cached, Registry):
        return cached
    plugins = [_DirectoryPlugin(Path(d)) for d in getattr(args, "manifests", [])]
    registry = build_registry(
        catalogue_for(args), plugins=plugins, import_entry_points=runs_adapters
    )
    args._registry = registry
    return registry


def unknown_family(family: str, examples: str) -> str | None:
    """The error for a ``family`` that is not a model type of the installed Transformers
    (``examples``: a few that are, for the message); ``None`` when it is one. Imports
    Transformers: call it where the command needs the model anyway."""
    from transformers import CONFIG_MAPPING

    if family in CONFIG_MAPPING:
        return None
    return (
        f"error: unknown family {family!r}: not a model_type of the installed Transformers "
        f"(see transformers.CONFIG_MAPPING); e.g. {examples}"
    )
