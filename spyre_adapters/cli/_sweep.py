"""``spyre-adapters sweep``: the enablement matrix over many families and releases.

Triages every (family, release) pair (default: every ``model_type`` of the installed
Transformers with a base model, at every built-in release), each family in its own worker
process with a time limit, ``--jobs`` at a time, with a progress bar on stderr. Families that
do not build from their config are reported as ``build-failed`` / ``reference-failed`` and left
out of the coverage denominators (``built``). Categories and the JSON schema are documented in
:mod:`spyre_adapters.enablement._sweep_report`.

Next to the terminal tables, every sweep saves its full results, since a sweep takes minutes
to hours and the tables keep only the verdicts: ``--out DIR`` (default ``sweep-out``) gets
``sweep.json`` (the document), ``sweep.html`` (the offline page) and ``results.jsonl`` (one
line per result as soon as its family is done, to watch a long sweep or salvage a killed one;
started afresh by each sweep). ``--json FILE``, ``--html FILE`` and ``--log FILE`` put one of
them elsewhere (``--log`` appends). Every path is checked before the first family runs.

``--testers DIR`` takes configs and inputs from the model testers of a Transformers test tree
(one worker per test file; :mod:`spyre_adapters.enablement.testers`), scaled to realistic widths unless
``--tiny``: the denominator of the types Transformers' own tests build.

For sweeps across machines use the pytest items instead (same workers, same classification)::

    pytest -p pytest_spyre.sweep_items --sweep-out DIR -n auto

Exit status: 0 when the sweep ran (whatever the verdicts), 2 for usage errors (an output path
that cannot be written included), 4 when a result file could not be written after the sweep
(it was kept in a fallback file, or printed: stderr says where).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spyre_adapters._outputs import OutputPathError, check_file
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import (
    add_output_options,
    diagnose,
    emit,
    keep,
    output_directory,
    output_file,
)

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
        "--testers",
        type=Path,
        metavar="DIR",
        help="a Transformers test tree: configs and inputs from its model testers, one worker "
        "per test file (FAMILY arguments name test folders); scaled to realistic widths "
        "unless --tiny",
    )
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
    parser.add_argument(
        "--out",
        type=output_directory,
        default="sweep-out",
        metavar="DIR",
        help="save sweep.json, sweep.html and results.jsonl here (default: sweep-out)",
    )
    parser.add_argument(
        "--json", dest="json_file", type=output_file, metavar="FILE", help="the JSON here instead"
    )
    parser.add_argument(
        "--html", dest="html_file", type=output_file, metavar="FILE", help="the page here instead"
    )
    parser.add_argument(
        "--log",
        type=output_file,
        metavar="FILE",
        help="append each result as a JSON line here instead of DIR/results.jsonl",
    )
    parser.add_argument(
        "--no-matrix", dest="matrix", action="store_false", help="summary tables only"
    )
    parser.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from spyre_adapters.enablement._sweep_html import render as render_html
    from spyre_adapters.enablement.families import candidate_families
    from spyre_adapters.enablement.sweep import default_releases, report_tables, run_sweep

    if args.testers is not None:
        from spyre_adapters.enablement.testers import test_files

        if not (args.testers / "tests" / "models").is_dir():
            diagnose(f"error: --testers {args.testers}: no tests/models folder in it")
            return ExitCode.USAGE
        files = test_files(args.testers)
        folders = set(args.families)
        families = [f for f in files if not folders or f.split("/")[2] in folders]
        missing = sorted(folders - {f.split("/")[2] for f in files})
        if missing:
            diagnose(f"error: no test folder {', '.join(map(repr, missing))} in {args.testers}")
            return ExitCode.USAGE
    else:
        known = candidate_families()
        families = list(args.families) or known
        unknown = [f for f in families if f not in known]
        if unknown:
            diagnose(
                f"error: unknown families {', '.join(map(repr, unknown))}: not model types with "
                "a base model in the installed Transformers"
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
    try:
        json_file, html_file, log = _outputs(args)
    except OutputPathError as error:
        diagnose(f"error: {error}")
        return ExitCode.USAGE
    except OSError as error:
        diagnose(
            f"error: cannot write in {error.filename or args.out}: {error.strerror or error} "
            "(choose another --out)"
        )
        return ExitCode.USAGE
    report = run_sweep(
        families,
        releases,
        preset=_preset(args),
        layout_checks=args.layout_checks,
        jobs=args.jobs,
        timeout=args.timeout,
        progress=args.progress,
        log=log,
        testers=args.testers,
    )
    document = report.to_json()
    json_text = json.dumps(document, indent=1) + "\n"
    html_text = render_html(document)
    # a result no file could take is printed after the tables (never lost)
    to_print = []
    if keep(args, json_file, json_text, "the sweep JSON") is None and not (
        args.format == "json" and args.output is None  # emit prints this very document
    ):
        to_print.append(json_text)
    if keep(args, html_file, html_text, "the sweep page") is None:
        to_print.append(html_text)
    emit(args, document, report_tables(report, matrix=args.matrix))
    for text in to_print:
        sys.stdout.write(text)
    return ExitCode.OK


def _preset(args: argparse.Namespace) -> str:
    if args.testers is not None:
        return "tester" if args.tiny else "tester-scaled"
    return "tiny" if args.tiny else "realistic"


def _outputs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """The JSON, HTML and log paths; creates ``--out`` when a default is used, starts the
    default log afresh, and checks every path (before any family runs)."""
    out: Path = args.out
    json_file = args.json_file or out / "sweep.json"
    html_file = args.html_file or out / "sweep.html"
    log = args.log or out / "results.jsonl"
    if not (args.json_file and args.html_file and args.log):
        out.mkdir(parents=True, exist_ok=True)
    for path in (json_file, html_file, log):
        check_file(path)
    if args.log is None:
        log.write_text("", encoding="utf-8")
    return json_file, html_file, log
