"""``spyre-adapters list``: every installed adapter version.

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "adapters",
     "adapters": [{"name", "version", "kind", "summary", "gaps", "families", "stacks",
                   "retire_by", "entry_point", "order", "source"}]}
"""

from __future__ import annotations

import argparse
from typing import Any

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, emit
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry

__all__ = ["add_parser", "manifest_json", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "list",
        help="list the installed adapters (every version)",
        description="List every installed adapter version with its gaps, stacks and source.",
    )
    add_output_options(parser)


def manifest_json(manifest: Manifest, registry: Registry) -> dict[str, Any]:
    """A manifest as JSON (shared by ``list`` and ``show``)."""
    return {
        "name": manifest.name,
        "version": str(manifest.version),
        "kind": manifest.kind.value,
        "summary": manifest.summary,
        "gaps": list(manifest.gaps),
        "families": list(manifest.families),
        "stacks": str(manifest.stacks),
        "retire_by": manifest.retire_by,
        "entry_point": manifest.entry_point,
        "order": manifest.order,
        "source": registry.source_of(manifest),
    }


def run(args: argparse.Namespace) -> int:
    registry = registry_for(args)
    table = TableData(
        "Installed adapters",
        ["adapter", "version", "kind", "stacks", "gaps", "families", "order"],
        caption=f"{len(registry)} adapter versions from plugins: {', '.join(registry.plugins) or 'none'}",
    )
    for m in registry.manifests():
        table.rows.append(
            [
                m.name,
                str(m.version),
                m.kind.value,
                str(m.stacks),
                ", ".join(m.gaps),
                ", ".join(m.families),
                str(m.order),
            ]
        )
    document = {
        "schema_version": 1,
        "kind": "adapters",
        "adapters": [manifest_json(m, registry) for m in registry.manifests()],
    }
    emit(args, document, [table])
    return ExitCode.OK
