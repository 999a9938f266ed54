"""``spyre-adapters sweep``: the enablement matrix over many families and releases.

Triages every (family, release) pair (default: every ``model_type`` of the installed
Transformers with a base model, at every built-in release), each family in its own worker
process with a time limit, ``--jobs`` at a time, with a progress bar on stderr. Families that
do not build from their config are reported as ``build-failed`` / ``reference-failed`` and left
out of the coverage denominators (``built``). Categories and the JSON schema are documented in
:mod:`spyre_adapters.sweep`; ``--json FILE`` and ``--html FILE`` write the full results and an
offline HTML page next to the terminal output.

For sweeps across machines use the pytest items instead (same workers, same classification)::

    pytest -p spyre_adapters.sweep_items --sweep-out DIR -n auto

Exit status: 0 when the sweep ran (whatever the verdicts), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import add_output_options, diagnose, emit

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="enablement matrix: triage many families at many releases (isolated, parallel)",
        description="Triage many Transformers families at many stack releases, each family in an "
        "isolated worker process, and classify each pair (native, adapted, blocked, mismatch, or "
        "a fixed failure category).",
    )
    parser.add_argument(
        "families", nargs="*", metavar="FAMILY", help="model types (default: every one)"
    )
    parser.add_argument(
        "--stack", action="append", metavar="R", help="release; repeatable (default: every one)"
    )
    parser.add_argument("--tiny", action="store_true", help="Transformers' tiny tester sizes")
    parser.add_argument(
        "--no-layout-checks", dest="layout_checks", action="store_false", help="layout rules off"
    )
    parser.add_argument("--jobs", "-j", type=int, default=None, help="workers (default: CPUs)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds per (family, release) before a worker is killed (default 300)",
    )
    parser.add_argument("--limit", type=int, help="only the first N families (sorted)")
    parser.add_argument("--json", dest="json_file", type=Path, help="write the results JSON here")
    parser.add_argument("--html", dest="html_file", type=Path, help="write the HTML page here")
    parser.add_argument(
        "--log", type=Path, help="append each result as a JSON line as soon as it is known"
    )
    parser.add_argument(
        "--no-matrix", dest="matrix", action="store_false", help="summary tables only"
    )
    parser.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from spyre_adapters.families import candidate_families
    from spyre_adapters.sweep import default_releases, report_tables, run_sweep, write_html

    known = candidate_families()
    families = list(args.families) or known
    unknown = [f for f in families if f not in known]
    if unknown:
        diagnose(
            f"error: unknown families {', '.join(map(repr, unknown))}: not model types with a "
            "base model in the installed Transformers"
        )
        return ExitCode.USAGE
    releases = list(args.stack) if args.stack else default_releases()
    bad = [r for r in releases if r not in default_releases()]
    if bad:
        diagnose(
            f"error: unknown releases {', '.join(map(repr, bad))}; known: "
            + ", ".join(default_releases())
        )
        return ExitCode.USAGE
    if args.jobs is not None and args.jobs < 1:
        diagnose(f"error: --jobs must be >= 1 (got {args.jobs})")
        return ExitCode.USAGE
    families = sorted(families)[: args.limit] if args.limit else sorted(families)
    report = run_sweep(
        families,
        releases,
        preset="tiny" if args.tiny else "realistic",
        layout_checks=args.layout_checks,
        jobs=args.jobs,
        timeout=args.timeout,
        progress=args.progress,
        log=args.log,
    )
    document = report.to_json()
    if args.json_file:
        args.json_file.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        diagnose(f"wrote {args.json_file}")
    if args.html_file:
        write_html(report, args.html_file)
        diagnose(f"wrote {args.html_file}")
    emit(args, document, report_tables(report, matrix=args.matrix))
    return ExitCode.OK
