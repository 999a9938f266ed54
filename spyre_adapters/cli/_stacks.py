"""``spyre-adapters stacks``: the stack releases, and which gaps each closes and (re)opens.

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "stacks",
     "releases": [{"name": "2026.08", "date": "2026-08-31", "summary": "...",
                   "closes": ["embedding", ...],   # closed here, open at the previous release
                   "opens": ["mem-pool"],          # open here, closed at the previous release
                   "open": [...]}]}                # every gap open at this release
"""

from __future__ import annotations

import argparse
from typing import Any

from spyre_adapters.cli._context import catalogue_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, emit

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "stacks",
        help="list the stack releases and the gaps each closes or opens",
        description="List the stack releases (oldest first) and the gaps each closes or opens.",
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    catalogue = catalogue_for(args)
    gaps = list(catalogue.gaps)
    releases: list[dict[str, Any]] = []
    table = TableData("Stack releases", ["release", "date", "closes", "opens", "summary"])
    previous_open: set[str] | None = None
    for release in catalogue.releases:
        open_now = [g for g in gaps if release.gap_open(g)]
        closes = (
            []
            if previous_open is None
            else [g for g in gaps if g in previous_open and g not in open_now]
        )
        opens = [] if previous_open is None else [g for g in open_now if g not in previous_open]
        date = getattr(release, "date", None)
        summary = str(getattr(release, "summary", ""))
        releases.append(
            {
                "name": release.name,
                "date": date.isoformat() if date is not None else None,
                "summary": summary,
                "closes": closes,
                "opens": opens,
                "open": open_now,
            }
        )
        table.rows.append(
            [
                release.name,
                date.isoformat() if date is not None else "",
                ", ".join(closes) or ("(first release)" if previous_open is None else "-"),
                ", ".join(opens) or "-",
                summary,
            ]
        )
        previous_open = set(open_now)
    emit(args, {"schema_version": 1, "kind": "stacks", "releases": releases}, [table])
    return ExitCode.OK
