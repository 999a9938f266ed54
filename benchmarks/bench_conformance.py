"""Conformance of ``pytest --spyre`` on Transformers' own model tests, CPU and device side by side.

Runs the selected tests of a Transformers test tree (the copy with a ``run`` script described in
its README, by default ``../shared/transformers-tests`` next to this checkout) once on the CPU
and once per device mode, in one go, and prints per family and mode: tests that pass on the
CPU, how many of those pass on the device, the class of every failure (gap, precision,
miscompile, adapter, emulator, platform, unexplained; from the ``--spyre-report``), and wall time against
the CPU run of the same selection. A test the plugin skips because it runs backward on the
(inference-only) device is classed ``inference-only``; ``in-scope`` is the pass rate without
those tests, next to the pass rate of all CPU-passing ones::

    python benchmarks/bench_conformance.py --python .venv-tt/bin/python
    python benchmarks/bench_conformance.py --python ... --families llama,bert --selection fast
    python benchmarks/bench_conformance.py --python ... --mode faithful --stack 2026.05

``--python`` is the interpreter of a virtualenv that has the project, ``transformers==5.15.1``
and the tree's ``requirements.txt``. Selections: ``smoke`` (the tree's SMOKE list: 15 core tests
per file) or ``fast`` (whole files minus torch.compile and FSDP tests). Modes: ``cpu`` (always
run: the denominator), ``faithful`` (``--spyre``: numerics and layout checks on) and
``functional`` (``--spyre --spyre-numerics off --spyre-layout-checks off``). ``--json FILE``
writes every number and every non-passing test with its class. Beside the wall time, each
run's test time (junit's, over the tests every run ran) is printed with its ratio to the CPU's,
without pytest's start-up and collection, which weigh the same in every mode and so pull a
small selection's wall ratio towards 1, then the same over the tests that pass on the CPU
alone (tests the CPU skips as accelerator-only run on the device only); the test names that
add the most device time follow.
``--breakdown`` splits each run's test time into model calls, ``prepare`` and the rest
(``spyre_time_split.py``)::

    python benchmarks/bench_conformance.py --python ... --families llama,bert --breakdown
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TREE = ROOT.parent / "shared" / "transformers-tests"

# The tree's SMOKE list (its `run` script): 15 core tests per test file.
SMOKE_NAMES = (
    "test_model", "test_forward_signature", "test_model_outputs_equivalence",
    "test_batching_equivalence", "test_attention_outputs", "test_hidden_states_output",
    "test_determinism", "test_save_load", "test_inputs_embeds", "test_past_key_values_format",
    "test_left_padding_compatibility", "test_greedy_generate", "test_greedy_generate_dict_outputs",
    "test_generate_continue_from_past_key_values",
    "test_eager_matches_sdpa_inference_09_fp32_pad_left",
)  # fmt: skip
FAST_DESELECT = "not fsdp and not compil"

# At least one family of every kind: decoder, encoder, encoder-decoder, vision, speech,
# state-space, MoE.
DEFAULT_FAMILIES = (
    "llama", "gpt2", "gemma", "falcon", "opt", "bloom",  # decoders
    "bert", "roberta", "albert", "deberta",  # encoders
    "t5", "bart", "marian", "whisper",  # encoder-decoders (whisper: speech too)
    "vit", "deit", "swin", "resnet", "clip",  # vision (clip: dual encoder)
    "wav2vec2",  # speech
    "mamba2", "falcon_mamba", "rwkv",  # state-space / recurrent
    "olmoe", "granitemoe", "jamba",  # MoE (jamba: hybrid state-space MoE)
)  # fmt: skip

MODES: dict[str, list[str]] = {
    "cpu": [],
    "faithful": ["--spyre"],
    "functional": ["--spyre", "--spyre-numerics", "off", "--spyre-layout-checks", "off"],
}
CLASSES = ("gap", "precision", "miscompile", "adapter", "emulator", "platform", "unexplained")
#: The outcome of a test the plugin skips because it runs backward on the device (out of scope
#: for an inference-only device: pytest_spyre.inference_only), told apart from other skips.
INFERENCE_ONLY = "inference-only"
INFERENCE_ONLY_SKIP = "spyre: inference-only device"


@dataclass
class ModeRun:
    """One pytest run of the whole selection in one mode."""

    mode: str
    wall: float
    outcomes: dict[str, str]  # nodeid -> passed/failed/skipped/inference-only/error
    classes: dict[str, dict[str, str]] = field(default_factory=dict)  # nodeid -> failure
    split: dict[str, float] = field(default_factory=dict)  # --breakdown: seconds by part
    times: dict[str, float] = field(default_factory=dict)  # nodeid -> seconds (junit time)


def _family(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[2] if len(parts) > 3 and parts[1] == "models" else parts[0]


def _unclassed(outcome: str | None) -> str:
    """The class of a CPU-passing test that did not pass and has no failure in the report."""
    return outcome if outcome in ("skipped", INFERENCE_ONLY) else "unexplained"


def _junit_outcomes(path: Path, tree: Path) -> tuple[dict[str, str], dict[str, float]]:
    """Each test's outcome and its time (setup, call and teardown, as junit reports it)."""
    outcomes: dict[str, str] = {}
    times: dict[str, float] = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        parts = classname.split(".")
        nodeid = None
        for cut in range(len(parts), 0, -1):
            module = "/".join(parts[:cut]) + ".py"
            if (tree / "tree" / module).is_file():
                nodeid = "::".join([module, *parts[cut:], name])
                break
        if nodeid is None:
            continue
        tags = {child.tag: child for child in case}
        if "failure" in tags:
            outcome = "failed"
        elif "error" in tags:
            outcome = "error"
        elif "skipped" in tags:
            message = tags["skipped"].get("message", "")
            outcome = INFERENCE_ONLY if INFERENCE_ONLY_SKIP in message else "skipped"
        else:
            outcome = "passed"
        # a test with a failing teardown reports twice; the worse outcome wins
        if outcomes.get(nodeid) not in ("failed", "error"):
            outcomes[nodeid] = outcome
        times[nodeid] = times.get(nodeid, 0.0) + float(case.get("time") or 0.0)
    return outcomes, times


def _collect(
    runner: list[str], files: list[str], env: dict[str, str], deselect: str | None,
    flags: tuple[str, ...] = (),
) -> list[str]:  # fmt: skip
    cmd = [*runner, *files, "--collect-only", "-q", "-p", "no:logging", *flags]
    if deselect:
        cmd += ["-k", deselect]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    ids = [line.strip() for line in done.stdout.splitlines() if "::" in line and " " not in line]
    if not ids:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit("collection found no test; is --python the right interpreter?")
    return ids


#: Above this many characters of test ids, they go to pytest in a file (``@FILE``, one id per
#: line; pytest 8.2 and later): the whole tree's ``fast`` selection is some 100,000 ids, more
#: than a command line holds.
IDS_ON_COMMAND_LINE = 100_000


def _id_args(ids: list[str], path: Path) -> list[str]:
    """The arguments naming ``ids`` for pytest: the ids themselves, or ``@path`` holding them."""
    if sum(len(i) + 1 for i in ids) <= IDS_ON_COMMAND_LINE:
        return list(ids)
    path.write_text("".join(f"{i}\n" for i in ids))
    return [f"@{path}"]


def common_ids(cpu: list[str], device: list[str]) -> tuple[list[str], list[str]]:
    """The ids both runs collect (in the CPU's order), and the others. A test parametrized by
    ``torch_device`` has another id in each (``test_simple_generate_0_cpu``): given to the other
    run, pytest stops at "not found" (under xdist it runs nothing and exits 0)."""
    on_device = set(device)
    return [i for i in cpu if i in on_device], sorted(on_device.symmetric_difference(cpu))


def _run(
    mode: str, runner: list[str], ids: list[str], env: dict[str, str], extra: list[str],
    tree: Path, workdir: Path,
) -> ModeRun:  # fmt: skip
    junit = workdir / f"{mode}.xml"
    report = workdir / f"{mode}.json"
    cmd = [*runner, *_id_args(ids, workdir / f"{mode}.ids"), "-q", "-p", "no:logging", "--tb=no",
           f"--junitxml={junit}", *extra]  # fmt: skip
    if mode != "cpu":
        cmd += [*MODES[mode], f"--spyre-report={report}"]
    split = workdir / f"{mode}.split"
    if env.get("SPYRE_TIME_SPLIT") is not None:
        cmd += ["-p", "spyre_time_split"]
        env = dict(env, SPYRE_TIME_SPLIT=str(split))
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1) or not junit.is_file():
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"pytest exited {done.returncode} in mode {mode}")
    outcomes, times = _junit_outcomes(junit, tree)
    if ids and not outcomes:  # never a table of "unexplained" for tests that did not run
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"pytest ran none of the {len(ids)} tests in mode {mode}")
    result = ModeRun(mode, wall, outcomes, times=times)
    for part in workdir.glob(f"{mode}.split.*"):  # one file per pytest process
        for key, value in json.loads(part.read_text()).items():
            result.split[key] = result.split.get(key, 0.0) + value
    if report.is_file():
        data = json.loads(report.read_text())
        for test in data.get("tests", []):
            failure = test.get("failure")
            if failure:
                result.classes[test["nodeid"]] = failure
    return result


def _table(runs: list[ModeRun], families: list[str]) -> tuple[str, dict[str, Any]]:
    cpu = next(r for r in runs if r.mode == "cpu")
    cpu_pass = {n for n, o in cpu.outcomes.items() if o == "passed"}
    lines = []
    width = max([13, *map(len, families)]) + 1
    head = (
        f"{'family':<{width}}{'mode':<11}{'cpu-pass':>9}{'pass':>6}{'pct':>7}{'in-scope':>9}"
        "  failures by class"
    )
    lines.append(head)
    summary: dict[str, Any] = {"families": {}, "totals": {}}
    for fam in [*families, "ALL"]:
        mine = {n for n in cpu_pass if fam == "ALL" or _family(n) == fam}
        for run in runs:
            if run.mode == "cpu":
                continue
            passed = {n for n in mine if run.outcomes.get(n) == "passed"}
            classes: Counter[str] = Counter()
            for nodeid in sorted(mine - passed):
                outcome = run.outcomes.get(nodeid, "missing")
                failure = run.classes.get(nodeid)
                classes[failure["class"] if failure is not None else _unclassed(outcome)] += 1
            pct = 100.0 * len(passed) / len(mine) if mine else 0.0
            # in scope: without the tests that run backward (the device is inference-only)
            scope = len(mine) - classes[INFERENCE_ONLY]
            in_scope = 100.0 * len(passed) / scope if scope else 0.0
            text = ", ".join(f"{k} {v}" for k, v in sorted(classes.items())) or "-"
            lines.append(
                f"{fam:<{width}}{run.mode:<11}{len(mine):>9}{len(passed):>6}{pct:>6.1f}%"
                f"{in_scope:>8.1f}%  {text}"
            )
            entry = {
                "cpu_passing": len(mine),
                "in_scope": scope,
                "passing": len(passed),
                "failures": dict(classes),
            }
            target = summary["totals"] if fam == "ALL" else summary["families"].setdefault(fam, {})
            target[run.mode] = entry
    lines.append("")
    lines.append(f"{'mode':<11}{'wall s':>9}{'x cpu':>8}")
    for run in runs:
        lines.append(f"{run.mode:<11}{run.wall:>9.1f}{run.wall / cpu.wall:>8.2f}")
        summary.setdefault("wall", {})[run.mode] = {"seconds": round(run.wall, 1),
                                                    "ratio": round(run.wall / cpu.wall, 3)}  # fmt: skip
    lines.extend(_test_times(runs, cpu, summary))
    if cpu.split:
        lines.append("")
        lines.append(
            f"{'mode':<11}{'tests s':>9}{'model calls':>13}{'prepare':>9}{'rest':>8}"
            f"{'calls':>7}{'prepares':>10}  (test call phases; x cpu: tests, model calls, rest)"
        )
        for run in runs:
            part = run.split
            rest = part["tests"] - part["model_calls"] - part["prepare"]
            cpu_rest = cpu.split["tests"] - cpu.split["model_calls"] - cpu.split["prepare"]
            ratios = (
                f"{part['tests'] / cpu.split['tests']:.2f}, "
                f"{part['model_calls'] / max(cpu.split['model_calls'], 1e-9):.2f}, "
                f"{rest / max(cpu_rest, 1e-9):.2f}"
            )
            lines.append(
                f"{run.mode:<11}{part['tests']:>9.1f}{part['model_calls']:>13.1f}"
                f"{part['prepare']:>9.1f}{rest:>8.1f}{int(part['calls']):>7}"
                f"{int(part['prepares']):>10}  {ratios}"
            )
            summary.setdefault("breakdown", {})[run.mode] = {
                **{k: round(v, 2) for k, v in part.items()},
                "rest": round(rest, 2),
            }
    return "\n".join(lines), summary


def _test_times(runs: list[ModeRun], cpu: ModeRun, summary: dict[str, Any]) -> list[str]:
    """The tests' own time (junit's, without pytest's start-up and collection, which the wall
    time holds in every mode alike), over the tests every run ran, and the test names that
    add the most to it on the device: where a wall-time ratio comes from."""
    common = set(cpu.times)
    for run in runs:
        common &= set(run.times)
    if not common:
        return []
    lines = ["", f"{'mode':<11}{'tests s':>9}{'x cpu':>8}  (test time of the {len(common)} "
             "tests every run ran, start-up and collection left out)"]  # fmt: skip
    by_name: dict[str, dict[str, float]] = {}
    for nodeid in common:
        entry = by_name.setdefault(nodeid.rpartition("::")[2], {})
        for run in runs:
            entry[run.mode] = entry.get(run.mode, 0.0) + run.times[nodeid]
    totals = {run.mode: sum(entry[run.mode] for entry in by_name.values()) for run in runs}
    for mode, total in totals.items():
        ratio = total / max(totals["cpu"], 1e-9)
        lines.append(f"{mode:<11}{total:>9.1f}{ratio:>8.2f}")
        summary.setdefault("test_time", {})[mode] = {"seconds": round(total, 1),
                                                     "ratio": round(ratio, 3)}  # fmt: skip
    lines.extend(_like_for_like(runs, cpu, common, summary))
    device = [run.mode for run in runs if run.mode != "cpu"]
    if device:
        worst = sorted(by_name, key=lambda n: -(by_name[n][device[0]] - by_name[n]["cpu"]))
        lines.append(f"test names adding the most {device[0]} time (s: cpu, "
                     + ", ".join(device) + ")")  # fmt: skip
        for name in worst[:8]:
            parts = ", ".join(f"{by_name[name][m]:.1f}" for m in ["cpu", *device])
            lines.append(f"  {name}: {parts}")
        summary["test_time_by_name"] = {
            name: {m: round(v, 2) for m, v in sorted(by_name[name].items())}
            for name in sorted(by_name)
        }
    return lines


def _like_for_like(
    runs: list[ModeRun], cpu: ModeRun, common: set[str], summary: dict[str, Any]
) -> list[str]:
    """Test time over the tests that pass on the CPU (the ones the pass figures count), where
    every run does the same work. A test the CPU skips (one that asks for an accelerator, such
    as ``test_can_load_with_global_device_set``, which runs itself again in a child pytest)
    takes time on the device only, and weighs on the ratio over every test alone."""
    same = {n for n in common if cpu.outcomes.get(n) == "passed"}
    if not same or same == common:
        return []
    totals = {run.mode: sum(run.times[n] for n in same) for run in runs}
    lines = [f"{'mode':<11}{'tests s':>9}{'x cpu':>8}  (the {len(same)} of them that pass on "
             "the CPU)"]  # fmt: skip
    for mode, total in totals.items():
        ratio = total / max(totals["cpu"], 1e-9)
        lines.append(f"{mode:<11}{total:>9.1f}{ratio:>8.2f}")
        summary.setdefault("test_time_cpu_passing", {})[mode] = {"seconds": round(total, 1),
                                                                 "ratio": round(ratio, 3)}  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter of the tree's virtualenv")
    parser.add_argument(
        "--tree", type=Path, default=Path(os.environ.get("SPYRE_TT_DIR", DEFAULT_TREE))
    )
    parser.add_argument("--families", default=",".join(DEFAULT_FAMILIES))
    parser.add_argument("--selection", choices=("smoke", "fast"), default="smoke")
    parser.add_argument("--mode", action="append", choices=("faithful", "functional"))
    parser.add_argument("--stack", default=None, help="stack release of the device runs")
    parser.add_argument(
        "-n", "--jobs", type=int, default=0, help="pytest-xdist workers (0: serial)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures to FILE")
    parser.add_argument(
        "--reports", type=Path, default=None,
        help="keep each device mode's --spyre-report as DIR/<mode>.json (e.g. for "
        "python -m pytest_spyre.expectations)",
    )  # fmt: skip
    parser.add_argument(
        "--breakdown", action="store_true",
        help="split each run's test time into model calls, prepare and the rest",
    )  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments for every run")
    args = parser.parse_args(argv)

    runner_script = args.tree / "run"
    if not runner_script.is_file():
        print(f"bench_conformance: no Transformers test tree at {args.tree} (no `run` script); "
              "give --tree or set SPYRE_TT_DIR", file=sys.stderr)  # fmt: skip
        return 2
    if args.json is not None and not args.json.parent.resolve().is_dir():
        print(
            f"bench_conformance: the directory of --json {args.json} does not exist",
            file=sys.stderr,
        )
        return 2
    if args.reports is not None and not args.reports.is_dir():
        print(f"bench_conformance: --reports {args.reports} is not a directory", file=sys.stderr)
        return 2
    families = [f for f in args.families.split(",") if f]
    files = []
    for fam in families:
        path = f"tests/models/{fam}/test_modeling_{fam}.py"
        if not (args.tree / "tree" / path).is_file():
            print(f"bench_conformance: {fam}: no {path} in the tree; skipped", file=sys.stderr)
            continue
        files.append(path)
    env = dict(os.environ, PYTHON=args.python)
    if args.breakdown:
        here = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        env["SPYRE_TIME_SPLIT"] = ""  # each run names its own file (see _run)
    runner = [str(runner_script)]
    deselect = FAST_DESELECT if args.selection == "fast" else None
    ids = _collect(runner, files, env, deselect)
    ids, apart = common_ids(ids, _collect(runner, files, env, deselect, ("--spyre",)))
    if args.selection == "smoke":
        pattern = re.compile(r"::(" + "|".join(SMOKE_NAMES) + r")$")
        ids = [i for i in ids if pattern.search(i)]
    print(f"{len(ids)} tests selected ({args.selection}) in {len(files)} files", file=sys.stderr)
    if apart:
        print(f"{len(apart)} tests left out: collected on the CPU or on the device only "
              f"(named after the device they run on), e.g. {apart[0]}", file=sys.stderr)  # fmt: skip
    extra = list(args.pytest_args)
    if args.jobs:
        extra += ["-n", str(args.jobs)]
    device_extra = [*extra, *([f"--spyre-stack={args.stack}"] if args.stack else [])]
    modes = args.mode or ["faithful", "functional"]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for mode in ["cpu", *modes]:
            print(f"running {mode} ...", file=sys.stderr)
            runs.append(_run(mode, runner, ids, env, extra if mode == "cpu" else device_extra,
                             args.tree, work))  # fmt: skip
            if args.reports is not None and (work / f"{mode}.json").is_file():
                shutil.copyfile(work / f"{mode}.json", args.reports / f"{mode}.json")
    text, summary = _table(runs, [f for f in families if any(_family(i) == f for i in ids)])
    summary["selection"] = args.selection
    summary["stack"] = args.stack or "newest"
    summary["failing"] = {
        run.mode: {n: run.classes.get(n, {"class": _unclassed(run.outcomes.get(n)),
                                          "detail": run.outcomes.get(n, "missing")})
                   for n in sorted(ids) if run.outcomes.get(n) != "passed"
                   and next(r for r in runs if r.mode == "cpu").outcomes.get(n) == "passed"}
        for run in runs if run.mode != "cpu"
    }  # fmt: skip
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
