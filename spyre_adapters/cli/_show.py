"""``spyre-adapters show NAME``: one adapter's manifest and its status at every release.

The manifest table adds what a lock records for that version: the sha256 of the manifest
file and of the implementation (:mod:`spyre_adapters.implementation`), and the distribution
providing it; these are the values ``manifests/released.sha256`` records for a built-in release.

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "adapter",
     "adapter": {...as in `list`..., "manifest_sha256", "implementation_sha256"},
     "versions": ["1.0", "2.0"],                  # the version shown: default the highest
     "timeline": [{"release", "version", "status", "open_gaps", "retirable_in"}]}
"""

from __future__ import annotations

import argparse

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._list import manifest_json, superseded_at, superseded_text
from spyre_adapters.cli._output import TableData, add_output_options, emit
from spyre_adapters.implementation import implementation_sha256
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.lock import manifest_sha256

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "show",
        help="show one adapter's manifest and its status at every release",
        description="Show one adapter's manifest and, for every release, the version resolved "
        "and its status.",
    )
    parser.add_argument("name", help="adapter name")
    parser.add_argument("--version", dest="adapter_version", help="manifest version to show")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    registry = registry_for(args, runs_adapters=False)
    manifest = registry.get(args.name, args.adapter_version)
    lifecycle = Lifecycle(registry)
    timeline = lifecycle.timeline(args.name)
    details = {
        **manifest_json(manifest, registry),
        "superseded_at": superseded_at(registry)[manifest.key],
        "manifest_sha256": manifest_sha256(manifest),
        "implementation_sha256": implementation_sha256(manifest),
    }
    fields = TableData(f"Adapter {manifest.label}", ["key", "value"])
    for key, value in details.items():
        if key == "superseded_at":
            shown = superseded_text(list(value), registry)
        elif isinstance(value, list):
            shown = ", ".join(value)
        else:
            shown = "-" if value is None else str(value)
        fields.rows.append([key, shown])
    steps = TableData(
        f"{manifest.name} by release (auto-retire on)",
        ["release", "version", "status", "open gaps", "retirable in"],
        status_column=2,
    )
    for row in timeline:
        steps.rows.append(
            [
                row.release,
                str(row.version),
                row.status.value,
                ", ".join(row.open_gaps) or "-",
                row.retirable_in or "never",
            ]
        )
    document = {
        "schema_version": 1,
        "kind": "adapter",
        "adapter": details,
        "versions": [str(m.version) for m in registry.versions(manifest.name)],
        "timeline": [
            {
                "release": row.release,
                "version": str(row.version),
                "status": row.status.value,
                "open_gaps": list(row.open_gaps),
                "retirable_in": row.retirable_in,
            }
            for row in timeline
        ],
    }
    emit(args, document, [fields, steps])
    return ExitCode.OK
