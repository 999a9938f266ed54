"""Day one: how long `triage` + `bridge` take for a family no adapter names, and how it ends.

For each family (default: a sample of the built families that no manifest lists, taken from
a sweep JSON), runs, each in a fresh process as a user would, ``spyre-adapters triage FAMILY
--stack R`` and then ``spyre-adapters bridge FAMILY --stack R --format json``, and prints the
wall time of the two together and the outcome: the family runs and matches the CPU (``runs``
or ``bridged``), or the list of what no candidate could bridge. Side by side in the same run,
the wall time of one CPU forward of the family in a fresh process (the floor any tool pays:
interpreter, torch, Transformers, building the model).

``--fresh`` runs the loop with the hand-written adapters only (the generated bridges
disabled), so every op the family needs is bridged there and then, as on the day the first
family with that op lands.

    python benchmarks/bench_day_one.py --sweep sweep-out/sweep.json --stack 2026.09 --sample 8
    python benchmarks/bench_day_one.py --family olmoe --family t5 --stack 2026.09 --fresh

Target (issue 14): under 60 s for triage + bridge on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORWARD = """
import sys, warnings
warnings.simplefilter("ignore")
import transformers
transformers.logging.set_verbosity_error()
from spyre_adapters.enablement.families import build_family
build_family(sys.argv[1])
"""


def _named_by_manifests() -> set[str]:
    from spyre_adapters import default_registry

    return {f for m in default_registry().manifests() for f in m.families}


def _families(args: argparse.Namespace) -> list[str]:
    if args.family:
        return list(args.family)
    data = json.loads(args.sweep.read_text("utf-8"))
    named = _named_by_manifests()
    built = sorted(
        {
            r["family"]
            for r in data["results"]
            if r["release"] == args.stack and r["category"] not in _NOT_BUILT
        }
        - named
    )
    step = max(1, len(built) // max(args.sample, 1))
    return built[::step][: args.sample]


_NOT_BUILT = {"build-failed", "reference-failed", "worker-crashed", "worker-timeout"}


def _hand_written_only(env: dict[str, str]) -> list[str]:
    """``--manifests DIR`` arguments naming a copy of the hand-written built-in manifests, and
    the environment turning the built-in plugin off."""
    from spyre_adapters import build_registry, builtin

    folder = Path(tempfile.mkdtemp(prefix="hand-written-"))
    for manifest in build_registry(entry_points=False, plugins=[builtin]).manifests():
        if manifest.generated:
            continue
        target = folder / manifest.name / Path(manifest.source).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(manifest.source).read_bytes())
    env["SPYRE_ADAPTERS_DISABLE"] = "builtin"
    return ["--manifests", str(folder)]


def _timed(
    command: list[str], env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, help="a sweep JSON to sample families from")
    parser.add_argument("--family", action="append", help="model type (instead of --sweep)")
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument("--sample", type=int, default=8)
    parser.add_argument("--fresh", action="store_true", help="hand-written adapters only")
    args = parser.parse_args(argv)
    if not args.family and args.sweep is None:
        parser.error("give --sweep or --family")
    env = dict(os.environ)
    extra = _hand_written_only(env) if args.fresh else []
    cli = [str(Path(sys.executable).parent / "spyre-adapters"), *extra]
    rows = []
    for family in _families(args):
        forward, _ = _timed([sys.executable, "-c", FORWARD, family], env)
        triage_s, triage = _timed([*cli, "triage", family, "--stack", args.stack], env)
        bridge_s, bridge = _timed(
            [*cli, "bridge", family, "--stack", args.stack, "--format", "json"], env
        )
        try:
            result = json.loads(bridge.stdout)["result"]
            outcome, detail = result["outcome"], result["detail"]
        except (json.JSONDecodeError, KeyError):
            outcome, detail = "error", (bridge.stderr.strip().splitlines() or ["?"])[-1]
        total = triage_s + bridge_s
        rows.append((family, total, forward, outcome))
        print(
            f"{family}: triage {triage_s:.1f} s (exit {triage.returncode}) + bridge "
            f"{bridge_s:.1f} s = {total:.1f} s (CPU forward alone {forward:.1f} s): "
            f"{outcome}: {detail[:240]}"
        )
    if rows:
        totals = [r[1] for r in rows]
        ratio = statistics.median(r[1] / r[2] for r in rows)
        ended = sum(
            1 for r in rows if r[3] in ("runs", "bridged", "unbridged", "mismatch", "not-judged")
        )
        print(
            f"\n{len(rows)} families at {args.stack}{' (hand-written adapters only)' if args.fresh else ''}: "
            f"triage + bridge median {statistics.median(totals):.1f} s, max {max(totals):.1f} s "
            f"(target < 60 s); median {ratio:.1f}x a CPU forward in a fresh process; "
            f"{sum(1 for r in rows if r[3] in ('runs', 'bridged'))} run and match the CPU, "
            f"{ended} ended with a verdict"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
