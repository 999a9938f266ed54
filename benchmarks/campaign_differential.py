"""Differential campaign: drawn configurations of every adapter's families, at every release.

For every family listed by an installed adapter manifest, ``--configs`` configurations are
drawn (:func:`spyre_adapters.enablement.differential.drawn_cases`, seeded: the same cases on every run),
built from their configs with random weights, and run at every release of the catalogue with
the adapters the lifecycle resolves there, each compared with the stock model on the CPU
(:mod:`spyre_adapters.enablement.differential`). Each case runs in an isolated worker process.

Prints configurations x releases tried, the outcomes (match / raised with a gap / flagged
miscompile / precision / missed miscompile / silent mismatch / CPU mismatch / error), every
miscompile the device recorded with the outcomes of the runs it was recorded in (a run whose
output stays within the metric still shows it), the same per adapter (runs where it was
applied; an op bridge, which every model matches, only where it bridged one of its ops), every
run that is not acceptable and every precision-only mismatch, each with its configuration. Exit status 1 when a run is not acceptable.

    python benchmarks/campaign_differential.py                       # every family, 10 configs
    python benchmarks/campaign_differential.py --configs 40 --jobs 2 --json out.json
    python benchmarks/campaign_differential.py --family llama --stack 2026.05
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from spyre_adapters import default_registry
    from spyre_adapters.enablement.differential import (
        CaseResult,
        Outcome,
        adapter_families,
        campaign,
        drawn_cases,
    )
    from spyre_sim import builtin_catalogue

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=10, help="configurations per family")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", action="append", help="model type (default: every one)")
    parser.add_argument("--stack", action="append", help="release (default: every one)")
    parser.add_argument("--jobs", type=int, default=1, help="isolated workers at a time")
    parser.add_argument("--timeout", type=float, default=120.0, help="s per case and release")
    parser.add_argument("--json", type=Path, help="write every run here (JSON)")
    args = parser.parse_args(argv)
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: the folder {args.json.parent} does not exist")

    registry = default_registry()
    by_adapter = adapter_families(registry)
    families = sorted({f for fams in by_adapter.values() for f in fams})
    if args.family:
        unknown = sorted(set(args.family) - set(families))
        if unknown:
            parser.error(f"no adapter lists {', '.join(unknown)}; known: {', '.join(families)}")
        families = sorted(set(args.family))
    releases = list(args.stack or builtin_catalogue().names)
    cases = [case for f in families for case in drawn_cases(f, args.configs, args.seed)]

    start = time.perf_counter()
    results: list[CaseResult] = []
    for done, result in enumerate(campaign(cases, releases, jobs=args.jobs, timeout=args.timeout)):
        results.append(result)
        print(
            f"\r{done + 1}/{len(cases)} cases, {time.perf_counter() - start:.0f} s",
            end="",
            file=sys.stderr,
            flush=True,
        )
    print(file=sys.stderr)
    wall = time.perf_counter() - start

    built = [r for r in results if r.built]
    runs = [run for r in built for run in r.runs]
    outcomes = Counter(run.outcome for run in runs)
    print(
        f"{len(cases)} configurations drawn ({len(families)} families x {args.configs}, seed "
        f"{args.seed}); {len(built)} built, {len(cases) - len(built)} not buildable as drawn"
    )
    print(
        f"{len(built)} configurations x {len(releases)} releases = {len(runs)} runs in {wall:.0f} s"
    )
    print("outcomes: " + ", ".join(f"{o.value} {outcomes.get(o, 0)}" for o in Outcome))
    gaps = Counter(run.gap for run in runs if run.outcome is Outcome.RAISED)
    print("raised by gap: " + ", ".join(f"{g} {n}" for g, n in gaps.most_common()))
    # every miscompile the device recorded, also in runs whose output stayed within the metric
    recorded: dict[str, Counter[Outcome]] = defaultdict(Counter)
    for run in runs:
        for gap in run.miscompiles:
            recorded[gap][run.outcome] += 1
    print(
        "miscompiles recorded (runs, by outcome): "
        + (
            "; ".join(
                f"{gap} {sum(by.values())} ("
                + ", ".join(f"{o.value} {n}" for o, n in by.most_common())
                + ")"
                for gap, by in sorted(recorded.items())
            )
            or "none"
        )
    )

    per_adapter: dict[str, Counter[Outcome]] = defaultdict(Counter)
    for run in runs:
        for label in run.adapters:
            per_adapter[label.split(" ", 1)[0]][run.outcome] += 1
    print("\nper adapter (runs where it was applied; an op bridge where it bridged an op):")
    width = max([len("adapter"), *map(len, by_adapter)])
    print(f"  {'adapter':<{width}}" + "".join(f"{o.value:>16}" for o in Outcome))
    for name in sorted(by_adapter):
        counts = per_adapter.get(name, Counter())
        print(f"  {name:<{width}}" + "".join(f"{counts.get(o, 0):>16}" for o in Outcome))

    bad = [run for run in runs if not run.outcome.acceptable]
    close = [run for run in runs if run.outcome is Outcome.PRECISION]
    for title, listed in (
        ("runs that are not acceptable", bad),
        ("precision-only mismatches (acceptable: a precision control explains each)", close),
    ):
        print(f"\n{title}: {len(listed)}")
        for run in listed:
            print(f"- {run.outcome.value} at {run.release}: {run.case.describe()}")
            print(f"    {run.detail}")
            print(f"    adapters: {', '.join(run.adapters) or 'none'}")
    if args.json is not None:
        document = {
            "schema_version": 1,
            "kind": "differential-campaign",
            "configs_per_family": args.configs,
            "seed": args.seed,
            "families": families,
            "releases": releases,
            "wall_seconds": wall,
            "unbuilt": [
                {"case": r.case.to_json(), "reason": r.reason} for r in results if not r.built
            ],
            "runs": [run.to_json() for run in runs],
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
