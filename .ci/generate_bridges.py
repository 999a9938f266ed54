"""Generate the built-in op bridges from what stops the families of a sweep.

For every family that a sweep found built but not enabled at a release (or the families
given), runs the bridge loop (``spyre-adapters bridge``) in an isolated worker at each
release asked, with the hand-written adapters only, so every op that stops a family is met.
Then, per op bridged anywhere: the captured arguments of every family that reached it are the
samples, the candidates are validated on them (and on variants of other shapes and dtypes) at
every release of the catalogue where the op does not lower, and one generated adapter version
is written per stretch of releases with the same first holding candidate
(``manifests/bridge-*/`` and ``spyre_adapters/library/bridge_*.py``), listing as verified the
families the loop made run and match the CPU with that op bridged.

    python .ci/generate_bridges.py --sweep sweep-out/sweep.json --stack 2026.05 --stack 2026.09
    python .ci/generate_bridges.py --family olmoe --family t5 --stack 2026.09 --dry-run
    python .ci/generate_bridges.py --sweep S.json --stack 2026.09 --save loops/ --dry-run
    python .ci/generate_bridges.py --load loops/ --load more-loops/   # plan and write only
    python .ci/generate_bridges.py --samples captured/ --dry-run   # from pytest's captures
    python .ci/generate_bridges.py --load loops/ --op aten.pow.Tensor_Scalar  # one op only
    python .ci/generate_bridges.py --sweep T/sweep.json --testers TREE --stack 2026.09

``--testers TREE`` builds each family from its model tester in a Transformers test tree (at
the testers' sizes scaled to realistic ones, as ``bench_sweep.py --testers`` does; with
``--sweep``, the non-enabled types of a testers' sweep). The samples each version is validated
on are then kept under ``tests/data/bridge-samples/`` for its tests (give ``--testers`` with
``--load`` of such loops too).

``--samples DIR`` (repeatable) plans from the bridge samples that ``pytest --spyre
--spyre-capture-bridges DIR`` recorded in a test suite (ops met only by the suite's inputs,
such as the loss of a forward with labels): per op, the candidates are validated on the
captured arguments and their variants at every release of the catalogue where the op is
refused, and each version lists as evidence the tests and module paths the samples came from
and as verified the model types they were captured in; the samples a version was validated
on are kept under ``tests/data/bridge-samples/`` for its tests. Given with ``--family`` or
``--sweep``, an op met by both gets the captured samples added to the loops' ones.

A version recorded as released (``manifests/released.sha256``) is never rewritten.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: At most this many captured samples per op (the most different signatures first).
MAX_SAMPLES = 6


def _families(args: argparse.Namespace) -> list[str]:
    if args.family:
        return sorted(set(args.family))
    data = json.loads(Path(args.sweep).read_text("utf-8"))
    wanted = set(args.stack)
    picked = {
        r["family"]
        for r in data["results"]
        if r["release"] in wanted
        and not r["enabled"]
        and r["category"]
        not in ("build-failed", "reference-failed", "worker-crashed", "worker-timeout")
    }
    return sorted(picked)


def main(argv: list[str] | None = None) -> int:
    from spyre_adapters.enablement._isolation import run_isolated
    from spyre_adapters.enablement.bridge import bridge_worker, load_samples

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, help="a sweep JSON: its non-enabled families")
    parser.add_argument("--family", action="append", help="model type (instead of --sweep)")
    parser.add_argument("--stack", action="append", help="release of the loops; repeatable")
    parser.add_argument(
        "--samples",
        type=Path,
        action="append",
        help="folder of bridge samples from pytest --spyre --spyre-capture-bridges; repeatable",
    )
    parser.add_argument(
        "--testers",
        type=Path,
        help="a Transformers test tree: build the families from its model testers (scaled)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="s per family")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    parser.add_argument(
        "--save", type=Path, help="save the loop results and captured samples in this folder"
    )
    parser.add_argument(
        "--load",
        type=Path,
        action="append",
        help="plan and write from folders written by --save instead of running loops",
    )
    parser.add_argument(
        "--op",
        action="append",
        help="plan and write only this op's bridges (e.g. aten.pow.Tensor_Scalar); repeatable",
    )
    args = parser.parse_args(argv)
    captures = _captures(args.samples or [])
    if captures is not None and args.op:
        captures = {op: found for op, found in captures.items() if op in args.op}

    def planned(rows: list[dict[str, Any]], samples: dict[str, list[Any]]) -> int:
        """Plan and write the versions of the loops' rows and samples (``--op``: its only)."""
        return write(
            rows,
            _only(samples, args.op),
            dry_run=args.dry_run,
            captures=captures,
            keep_samples=args.testers is not None,
        )

    if args.load:
        return planned(*_load(args.load))
    if not args.family and args.sweep is None:
        if captures is not None:
            return write([], {}, dry_run=args.dry_run, captures=captures)
        parser.error("give --sweep, --family or --samples")
    if not args.stack:
        parser.error("the loops of --sweep and --family need --stack R")
    if args.testers is not None and not (args.testers / "tests" / "models").is_dir():
        parser.error(f"--testers {args.testers}: not a Transformers test tree (no tests/models)")
    families = _families(args)
    print(f"{len(families)} families at {', '.join(args.stack)}", file=sys.stderr)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    samples: dict[str, list[Any]] = {}
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            pool.submit(
                run_isolated,
                bridge_worker,
                (
                    family,
                    list(args.stack),
                    "realistic" if args.testers is None else "tester-scaled",
                    True,
                    True,
                    None if args.testers is None else str(args.testers),
                ),
                timeout=args.timeout,
            ): family
            for family in families
        }
        for count, future in enumerate(as_completed(futures), 1):
            family = futures[future]
            outcome = future.result()
            if outcome.status != "ok":
                print(
                    f"[{count}/{len(families)}] {family}: worker {outcome.status}", file=sys.stderr
                )
                continue
            for result, data in outcome.value:
                rows.append(result)
                for op, found in load_samples(data).items():
                    samples.setdefault(op, []).extend(found)
                print(
                    f"[{count}/{len(families)}] {family} {result['release']}: "
                    f"{result['outcome']} {result['table']}",
                    file=sys.stderr,
                )
    print(f"loops: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.save is not None:
        import torch

        args.save.mkdir(parents=True, exist_ok=True)
        (args.save / "rows.json").write_text(json.dumps(rows, indent=1), "utf-8")
        torch.save(samples, args.save / "samples.pt")
    return planned(rows, samples)


def _captures(folders: list[Path]) -> dict[str, Any] | None:
    if not folders:
        return None
    from spyre_adapters.enablement.captured import CaptureFileError, load_captures

    try:
        return load_captures(folders)
    except CaptureFileError as exc:
        raise SystemExit(f"error: {exc}") from None


def _only(samples: dict[str, list[Any]], ops: list[str] | None) -> dict[str, list[Any]]:
    """The samples of ``ops`` only (every op when none is given)."""
    return samples if not ops else {op: found for op, found in samples.items() if op in ops}


def _load(folders: list[Path]) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    import torch

    rows: list[dict[str, Any]] = []
    samples: dict[str, list[Any]] = {}
    for folder in folders:
        rows.extend(json.loads((folder / "rows.json").read_text("utf-8")))
        for op, found in torch.load(folder / "samples.pt", weights_only=False).items():
            samples.setdefault(op, []).extend(found)
    return rows, samples


def _pick(found: list[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for sample in found:
        seen.setdefault(sample.signature, sample)
    return list(seen.values())[:MAX_SAMPLES]


def _renumber(versions: list[Any], released: set[tuple[str, str]]) -> list[Any]:
    """Number the versions left once the ones without a family are left out. A version whose
    files are those of a released version keeps that number (planning twice is stable); any
    other gets the next minor after the released ones and those numbered before it (a released
    version is immutable: new behaviour is a new version). A version's ``stacks`` range stays
    what its own releases make it."""
    import dataclasses

    from packaging.version import Version

    from spyre_adapters.enablement.captured import next_version
    from spyre_adapters.enablement.generation import manifest_text, module_text

    library = ROOT / "spyre_adapters" / "library"
    numbered: list[Any] = []
    for version in versions:
        taken = {v for n, v in released if n == version.name} | {
            v.version for v in numbered if v.name == version.name
        }
        same = None
        for number in sorted(taken, key=Version):
            candidate = dataclasses.replace(version, version=number)
            manifest = ROOT / "manifests" / version.name / f"{number}.toml"
            module = library / f"{candidate.module}.py"
            if (
                manifest.is_file()
                and module.is_file()
                and manifest.read_text("utf-8") == manifest_text(candidate)
                and module.read_text("utf-8") == module_text(candidate)
            ):
                same = candidate
                break
        if same is None:
            number = next_version({(version.name, v) for v in taken}, version.name)
            same = dataclasses.replace(version, version=number)
        numbered.append(same)
    return numbered


def write(
    rows: list[dict[str, Any]],
    samples: dict[str, list[Any]],
    *,
    dry_run: bool,
    captures: dict[str, Any] | None = None,
    keep_samples: bool = False,
) -> int:
    """Plan the versions of every op of ``samples`` (and ``captures``) and write them.
    ``keep_samples``: keep the samples each version planned from the loops was validated on
    under ``tests/data/bridge-samples/`` too, as a captured version's are (families built from
    a test tree's testers need not build from their config alone, which the tests of a version
    without samples use)."""
    import spyre_sim
    from spyre_adapters.enablement.captured import released_versions
    from spyre_adapters.enablement.generation import (
        NOT_NEEDED,
        plan_versions,
        versions_of,
        write_builtin,
    )
    from spyre_adapters.stacks import default_catalogue, is_lasting

    catalogue = default_catalogue()
    releases = [spyre_sim.resolve_stack(r.name) for r in catalogue.releases]
    released = released_versions(ROOT / "manifests" / "released.sha256")
    gaps: dict[str, str] = {}
    families: dict[str, dict[str, list[str]]] = {}  # op -> release -> families verified
    for row in rows:
        for item in row["bridged"]:
            if item["adapter"] is None:
                gaps.setdefault(item["op"], item["gap"])
        if row["outcome"] == "bridged":
            for op in row["table"]:
                at = families.setdefault(op, {}).setdefault(row["release"], [])
                at.append(row["family"])
    captures = dict(captures or {})
    for op in list(captures):
        if op in samples:  # met by the loops too: the captured arguments are more samples
            samples[op].extend(captures.pop(op).samples)
    versions, validated_on = _from_captures(captures, releases, catalogue)
    for op in sorted(samples):
        if not families.get(op):
            print(f"{op}: bridged, but no family ran and matched with it: not written")
            continue
        plans, failed = plan_versions(op, _pick(samples[op]), releases)
        made = versions_of(
            op,
            gaps[op],
            is_lasting(catalogue, gaps[op]),
            plans,
            families[op],
            catalogue,
            failed=failed,
        )
        kept = [v for v in made if v.families]
        for version in made:
            note = "" if version.families else "  (no family verified at its releases: not written)"
            print(
                f"{version.name} {version.version}: {op} {version.candidate} {version.stacks} "
                f"families={list(version.families)}{note}"
            )
        made = _renumber(kept, released)
        if keep_samples:
            validated_on.extend((version, _pick(samples[op])) for version in made)
        for release, why in failed.items():
            if why != NOT_NEEDED:
                print(f"  {op} at {release}: no candidate ({why[:160]})")
        versions.extend(made)
    if dry_run:
        return 0
    written = write_builtin(versions, ROOT / "manifests", ROOT / "spyre_adapters" / "library")
    from spyre_adapters.enablement.captured import write_sample_file

    for version, found in validated_on:
        path = ROOT / "tests" / "data" / "bridge-samples" / f"{version.name}-{version.version}.pt"
        write_sample_file(path, version.op, found)
        written.append(path)
    print(f"wrote {len(written)} files")
    return 0


def _from_captures(
    captures: dict[str, Any], releases: list[Any], catalogue: Any
) -> tuple[list[Any], list[tuple[Any, list[Any]]]]:
    """The versions planned from captured samples, and the samples each was validated on."""
    from spyre_adapters.enablement.captured import plan_captured, released_versions

    if not captures:
        return [], []
    released = released_versions(ROOT / "manifests" / "released.sha256")
    versions: list[Any] = []
    kept: list[tuple[Any, list[Any]]] = []
    for planned in plan_captured(captures, releases, catalogue, released=released):
        captured = captures[planned.op]
        print(
            f"{planned.op} (gap {captured.gap}): captured at {', '.join(captured.releases)} in "
            f"{len(captured.tests)} tests of {', '.join(captured.families) or 'no model type'}"
        )
        for note in planned.notes:
            print(f"  {note}")
        for version in planned.versions:
            print(
                f"  {version.name} {version.version}: {version.candidate} {version.stacks} "
                f"families={list(version.families)}"
            )
            if version.families:
                versions.append(version)
                kept.append((version, list(planned.samples)))
    return versions, kept


if __name__ == "__main__":
    raise SystemExit(main())
