"""The full enablement sweep as a separately runnable job, with its timing.

Runs ``spyre_adapters.enablement.sweep.run_sweep`` (isolated workers, one per family, ``--jobs`` at a time)
and writes ``OUT/sweep.json`` (schema in ``spyre_adapters/enablement/_sweep_report.py``), ``OUT/sweep.html``,
``OUT/results.jsonl`` (one line per result, as it arrives) and prints, per release, the number
of model types that are ``native`` or ``adapted``, the wall time and the mean seconds per
(family, release).

    python benchmarks/bench_sweep.py --out sweep-out                 # every family x release
    python benchmarks/bench_sweep.py --stack 2026.05 --stack 2026.09 # two releases
    python benchmarks/bench_sweep.py --sample 60                     # every k-th family
    python benchmarks/bench_sweep.py --report a/sweep.json b/sweep.json  # markdown summary
    python benchmarks/bench_sweep.py --report a/sweep.json --left-out      # + types left out
    python benchmarks/bench_sweep.py --testers TREE --out T                # testers' denominator

The same job on several machines: pytest-xdist distributes the sweep items (same workers and
classification):

    pytest -p pytest_spyre.sweep_items --sweep-out sweep-out -n auto [--tx ssh=host//python=...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def markdown_summary(paths: list[Path]) -> str:
    """A markdown table of the coverage per release in sweep JSON files (one row per file and
    release), with how each sweep ran."""
    lines = [
        "| sweep | sizes | release | types swept | built | native | adapted | of them with a "
        "generated adapter | **enabled** | blocked | not-impl. adapter | mismatch | wall s "
        "| mean s/pair |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        data = json.loads(path.read_text("utf-8"))
        for release, c in data["summary"].items():
            lines.append(
                f"| {path.parent.name} | {data['preset']} | {release} | {c['total']} | "
                f"{c['built']} | {c['native']} | {c['adapted']} | "
                f"{c.get('adapted_generated', '-')} | **{c['enabled']}** | {c['blocked']} | "
                f"{c['not-implemented-adapter']} | {c['mismatch']} | {data['wall_seconds']:.0f} "
                f"| {data['mean_seconds']:.2f} |"
            )
    return "\n".join(lines)


def left_out(path: Path) -> str:
    """A markdown list of the types a sweep left out of its denominator, grouped by reason."""
    data = json.loads(path.read_text("utf-8"))
    rows = data.get("left_out", [])
    lines = [f"{len(rows)} types left out of the denominator of {path.parent.name}:", ""]
    for row in rows:
        lines.append(f"- `{row['family']}` ({row['category']}): {row['detail'][:200]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from spyre_adapters.enablement.families import candidate_families
    from spyre_adapters.enablement.sweep import default_releases, run_sweep, write_html

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sweep-out"))
    parser.add_argument("--stack", action="append", help="release (default: every one)")
    parser.add_argument("--family", action="append", help="model type (default: every one)")
    parser.add_argument("--sample", type=int, help="only N families, evenly spread")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=120.0, help="s per (family, release)")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument(
        "--testers",
        type=Path,
        help="a Transformers test tree: configs and inputs from its model testers "
        "(scaled to realistic widths unless --tiny)",
    )
    parser.add_argument("--report", type=Path, nargs="+", help="summarise sweep JSON files")
    parser.add_argument(
        "--left-out", action="store_true", help="with --report: list every type left out"
    )
    args = parser.parse_args(argv)
    if args.report:
        print(markdown_summary(args.report))
        if args.left_out:
            for path in args.report:
                print("\n" + left_out(path))
        return 0

    if args.testers is not None:
        from spyre_adapters.enablement.testers import test_files

        families = [
            f for f in test_files(args.testers) if not args.family or f.split("/")[2] in args.family
        ]
        preset = "tester" if args.tiny else "tester-scaled"
    else:
        families = args.family or candidate_families()
        preset = "tiny" if args.tiny else "realistic"
    if args.sample:
        step = max(1, len(families) // args.sample)
        families = families[::step][: args.sample]
    releases = args.stack or default_releases()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "results.jsonl"
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    report = run_sweep(
        families,
        releases,
        preset=preset,
        jobs=args.jobs,
        timeout=args.timeout,
        progress=sys.stderr.isatty(),
        log=log,
        testers=args.testers,
    )
    wall = time.perf_counter() - start
    (args.out / "sweep.json").write_text(json.dumps(report.to_json(), indent=1), "utf-8")
    write_html(report, args.out / "sweep.html")
    pairs = len(report.results)
    unit = "test files" if args.testers is not None else "families"
    print(
        f"{unit}: {len(families)}; model types: {len(report.families)}; releases: "
        f"{', '.join(releases)}; pairs: {pairs}"
    )
    print(
        f"adapters: {len(report.adapters) - len(report.generated)} hand-written, "
        f"{len(report.generated)} generated"
    )
    print(
        f"wall: {wall:.1f} s with {args.jobs} workers; mean {report.mean_seconds():.2f} s "
        f"per (family, release) in a worker; {wall / max(pairs, 1):.2f} s wall per pair"
    )
    for release, counts in report.summary().items():
        print(
            f"{release}: {counts['enabled']} enabled ({counts['native']} native, "
            f"{counts['adapted']} adapted, {counts['adapted_generated']} of them with a "
            f"generated adapter), {counts['blocked']} blocked, "
            f"{counts['mismatch']} mismatch, {counts['built']} built of {counts['total']}"
        )
    for item in report.top_blockers(10):
        print(f"  blocker {item['gap']}: {item['pairs']} pairs, {len(item['families'])} families")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
