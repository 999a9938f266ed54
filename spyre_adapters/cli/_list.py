"""``spyre-adapters list``: every installed adapter version, and where a newer one supersedes it.

Versions of one adapter are installed side by side; the column ``superseded at`` lists the
releases of the catalogue where a newer installed version is the one resolved instead
(``every release`` when it is never resolved; ``-`` when it never is superseded). A version
superseded at every release (never applied unless a lock pins it) has no row of its own in the
table: it is named in the ``older`` column of its adapter's newest version (JSON lists every
version).

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "adapters",
     "adapters": [{"name", "version", "kind", "summary", "gaps", "families", "stacks",
                   "retire_by", "entry_point", "order", "source",
                   "distribution": "spyre-adapters" | null, "distribution_version",
                   "superseded_at": ["2026.07", ...]}]}
"""

from __future__ import annotations

import argparse
from typing import Any

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, emit
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry

__all__ = ["add_parser", "manifest_json", "run", "superseded_at", "superseded_text"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "list",
        help="list the installed adapters (every version)",
        description="List every installed adapter version with its gaps, stacks and source.",
    )
    add_output_options(parser)


def manifest_json(manifest: Manifest, registry: Registry) -> dict[str, Any]:
    """A manifest as JSON (shared by ``list`` and ``show``)."""
    provider = registry.provider_of(manifest)
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
        "distribution": provider.distribution,
        "distribution_version": provider.version,
    }


def superseded_at(registry: Registry) -> dict[tuple[str, object], list[str]]:
    """Per manifest key, the catalogue releases where a newer version supersedes it."""
    lifecycle = Lifecycle(registry)
    found: dict[tuple[str, object], list[str]] = {m.key: [] for m in registry.manifests()}
    for release in registry.catalogue.releases:
        for manifest in registry.manifests():
            if lifecycle.superseded_by(manifest, release) is not None:
                found[manifest.key].append(release.name)
    return found


def superseded_text(releases: list[str], registry: Registry) -> str:
    """``-``, ``every release`` or the releases, consecutive ones (in catalogue order) as one
    span: ``2025.12-2026.05, 2026.09``."""
    if not releases:
        return "-"
    order = [r.name for r in registry.catalogue.releases]
    if len(releases) == len(order):
        return "every release"
    chosen = set(releases)
    spans: list[list[str]] = []
    previous = False
    for name in order:
        if name in chosen:
            if previous:
                spans[-1].append(name)
            else:
                spans.append([name])
        previous = name in chosen
    return ", ".join(span[0] if len(span) == 1 else f"{span[0]}-{span[-1]}" for span in spans)


def run(args: argparse.Namespace) -> int:
    registry = registry_for(args, runs_adapters=False)
    superseded = superseded_at(registry)
    everywhere = len(registry.catalogue.releases)
    # a version superseded at every release is never applied (only a lock can pin it): it is
    # named in the "older" cell of its adapter's newest version instead of a row of its own
    folded: dict[str, list[str]] = {}  # name -> its versions superseded at every release
    folded_keys = set()
    for m in registry.manifests():
        if everywhere and len(superseded[m.key]) == everywhere:
            folded.setdefault(m.name, []).append(str(m.version))
            folded_keys.add(m.key)
    count = len(folded_keys)
    note = (
        f"; {count} {'version' if count == 1 else 'versions'} superseded at every release "
        f"{'is' if count == 1 else 'are'} named under 'older' "
        "(every version: --format json)"
        if count
        else ""
    )
    table = TableData(
        "Installed adapters",
        [
            "adapter",
            "version",
            "kind",
            "stacks",
            "gaps",
            "families",
            "superseded at",
            "older",
        ],
        caption=(
            f"{len(registry)} adapter versions from plugins: "
            f"{', '.join(registry.plugins) or 'none'}{note}; the families of an adapter, "
            "its order and entry point: spyre-adapters show NAME"
        ),
        folding=frozenset({4, 6, 7}),  # gaps, superseded at, older
    )
    newest = {m.name: m.key for m in registry.manifests()}  # manifests() is sorted by version
    for m in registry.manifests():
        if m.key in folded_keys:
            continue
        table.rows.append(
            [
                m.name,
                str(m.version),
                m.kind.value,
                str(m.stacks),
                ", ".join(m.gaps),
                str(len(m.families)),
                superseded_text(superseded[m.key], registry),
                ", ".join(folded.get(m.name, ())) if newest[m.name] == m.key else "",
            ]
        )
    document = {
        "schema_version": 1,
        "kind": "adapters",
        "adapters": [
            {**manifest_json(m, registry), "superseded_at": superseded[m.key]}
            for m in registry.manifests()
        ],
    }
    emit(args, document, [table])
    return ExitCode.OK
