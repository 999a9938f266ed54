"""``spyre-adapters bridge FAMILY --stack R``: bridge every op that stops a family, without hand-writing.

Builds FAMILY (realistic sizes; ``--tiny`` for Transformers' tester sizes; ``--testers DIR``
for the config and inputs of the family's model tester in a Transformers test tree) and runs
the bridge loop of :mod:`spyre_adapters.enablement.bridge` at release R with the resolved adapters: for
each op that stops it inside the model scope, the op's real arguments are captured and its
candidate forms (decompositions, references, rewrites into native ops, the host) are validated
on the device against the CPU on those arguments and on variants of other shapes and dtypes;
the first that holds is kept, and the family runs again, until it runs and matches the CPU or
what is left is listed with the reason no candidate could bridge it.

``--write DIR`` writes the ops bridged here as an installable third-party package (the layout
of ``spyre-adapters new``): one generated adapter per op (``bridge-<op>``), its manifest with
``generated = true`` and the evidence (candidate, inputs checked, the releases it was validated
at: every release of the catalogue where the op does not lower is tried), its module holding
the op-bridge table, and a test. DIR must be new or empty (checked before any work).

JSON (``--format json``, ``schema_version`` 1)::

    {"schema_version": 1, "kind": "bridge", "family": "olmoe", "preset": "realistic",
     "layout_checks": true, "result": {<BridgeResult.to_json()>}, "written": ["DIR/..."]}

Exit status: 0 when the family runs and matches the CPU at R (bridged, or nothing needed),
1 otherwise (the list says what no candidate could bridge), 2 usage errors, 4 when the package
could not be written after the work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from spyre_adapters._outputs import OutputPathError, check_new_directory, write_tree
from spyre_adapters.cli._context import registry_for, unknown_family
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, diagnose, emit

if TYPE_CHECKING:
    from spyre_adapters.enablement.bridge import BridgeResult
    from spyre_adapters.enablement.generation import GeneratedBridge
    from spyre_adapters.registry import Registry

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bridge",
        help="bridge every op that stops a family at a release: validated candidates, "
        "generated adapters",
        description="Run FAMILY at release R with the resolved adapters; for each op that "
        "stops it, capture its arguments, validate candidate forms (decompositions, refs, "
        "rewrites into native ops, the host) on the device against the CPU, keep the first "
        "that holds, and repeat until the family runs and matches the CPU. --write DIR writes "
        "the bridges as an installable package of generated adapters. Exit 0 when the family "
        "runs and matches, 1 otherwise.",
    )
    parser.add_argument("family", help="a Transformers model_type, e.g. olmoe")
    parser.add_argument(
        "--stack", metavar="R", help="stack release (name or release file); default: the newest"
    )
    parser.add_argument(
        "--write",
        type=Path,
        metavar="DIR",
        help="write the ops bridged here as an adapter package in DIR (new or empty)",
    )
    parser.add_argument(
        "--package",
        metavar="NAME",
        help="import package of --write (default: spyre_adapter_bridges_<family>)",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="Transformers' tiny tester sizes (not stick aligned)"
    )
    parser.add_argument(
        "--testers",
        type=Path,
        metavar="DIR",
        help="a Transformers test tree: take the family's config and inputs from its model "
        "tester (scaled to realistic sizes unless --tiny)",
    )
    parser.add_argument(
        "--no-layout-checks",
        dest="layout_checks",
        action="store_false",
        help="turn the device's layout rules off (functional mode)",
    )
    add_output_options(parser)


def _refusal(target: Path) -> str | None:
    try:
        check_new_directory(target)
    except OutputPathError as error:
        return f"--write: {error}"
    return None


def _tables(result: BridgeResult) -> list[TableData]:
    verdict = TableData(
        f"Bridge of {result.family} at {result.release} ({result.preset} sizes)",
        ["outcome", "detail"],
        rows=[[result.outcome, result.detail]],
        caption=f"{result.rounds} run(s), {result.seconds:.1f} s",
    )
    ops = TableData("Ops bridged", ["op", "gap", "module path", "candidate", "checks", "adapter"])
    tried = TableData("Candidates tried", ["op", "candidate", "holds", "why not"])
    for item in result.bridged:
        last = item.verdicts[-1] if item.verdicts else None
        counted = [c for c in last.checks if c.counts] if last is not None else []
        held = sum(1 for c in counted if c.outcome == "holds")
        ops.rows.append(
            [
                item.op,
                item.gap or "-",
                item.module_path or "-",
                item.candidate,
                f"{held}/{len(counted)} hold",
                item.adapter or "new",
            ]
        )
        for v in item.verdicts:
            tried.rows.append([item.op, v.candidate, "yes" if v.holds else "no", v.reason or "-"])
    tables = [verdict]
    if ops.rows:
        tables += [ops, tried]
    if result.unbridged:
        left = TableData(
            "What no candidate could bridge", ["op / gap", "module path", "why", "detail"]
        )
        for u in result.unbridged:
            left.rows.append(
                [f"{u.op or '-'} / {u.gap or '-'}", u.module_path or "-", u.why, u.detail]
            )
        tables.append(left)
    return tables


def generated_versions(
    result: BridgeResult, registry: Registry, package: str
) -> list[GeneratedBridge]:
    """The adapter versions for the ops bridged in ``result`` (validated at every release of
    the catalogue where the op does not lower)."""
    import spyre_sim
    from spyre_adapters.enablement.generation import plan_versions, versions_of
    from spyre_adapters.stacks import is_lasting

    catalogue = registry.catalogue
    releases = [spyre_sim.resolve_stack(r.name) for r in catalogue.releases]
    out: list[GeneratedBridge] = []
    for item in result.bridged:
        if item.adapter is not None:
            continue
        plans, failed = plan_versions(item.op, list(item.captured), releases)
        families = {result.release: [result.family]} if result.enabled else {}
        out.extend(
            versions_of(
                item.op,
                item.gap,
                is_lasting(catalogue, item.gap),
                plans,
                families,
                catalogue,
                failed=failed,
                first_version="0.1.0",
                package=package,
            )
        )
    return out


def run(args: argparse.Namespace) -> int:
    from spyre_adapters.enablement.bridge import bridge_family
    from spyre_adapters.enablement.families import build_family
    from spyre_adapters.enablement.size_presets import REALISTIC, TINY, FamilyBuildError
    from spyre_adapters.stacks import release_of

    problem = unknown_family(args.family, "llama, olmoe, t5")
    if problem is not None:
        diagnose(problem)
        return ExitCode.USAGE
    package = args.package or "spyre_adapter_bridges_" + args.family.replace("-", "_")
    if args.write is not None:
        refusal = _refusal(args.write)
        if not package.isidentifier():
            refusal = f"--package {package!r} is not a Python identifier"
        if refusal is not None:
            diagnose(f"error: {refusal}")
            return ExitCode.USAGE
    if args.testers is not None and not (args.testers / "tests" / "models").is_dir():
        diagnose(
            f"error: --testers {args.testers}: not a Transformers test tree (no tests/models "
            "folder in it)"
        )
        return ExitCode.USAGE
    registry = registry_for(args)
    catalogue = registry.catalogue
    release = release_of(args.stack, catalogue) if args.stack else catalogue.releases[-1]
    preset = TINY if args.tiny else REALISTIC
    try:
        if args.testers is not None:
            from spyre_adapters.enablement.testers import build_from_tester

            built = build_from_tester(args.family, args.testers, scaled=not args.tiny)
        else:
            built = build_family(args.family, preset=preset)
    except FamilyBuildError as exc:
        diagnose(f"error: {exc}")
        return ExitCode.FINDINGS
    result = bridge_family(
        built, cast(Any, release), registry=registry, layout_checks=args.layout_checks
    )
    written: list[str] = []
    code = ExitCode.OK if result.enabled else ExitCode.FINDINGS
    if args.write is not None:
        versions = generated_versions(result, registry, package)
        if not versions:
            diagnose("nothing new was bridged: no package written")
        else:
            from spyre_adapters.enablement.generation import package_files

            files = package_files(
                versions, package=package, family=args.family, release=release.name
            )
            try:
                write_tree(args.write, files)
            except OSError as error:
                diagnose(f"error: could not create {args.write} ({error}); nothing was left behind")
                code = ExitCode.WRITE_FAILED
            else:
                written = [str(args.write / relative) for relative in files]
                diagnose(
                    f"wrote {args.write}: {len(versions)} generated adapter(s) in package "
                    f"{package}; `pip install -e {args.write}` then `spyre-adapters list`"
                )
    document: dict[str, Any] = {
        "schema_version": 1,
        "kind": "bridge",
        "family": args.family,
        "preset": result.preset,
        "layout_checks": args.layout_checks,
        "result": result.to_json(),
        "written": written,
    }
    emit(args, document, _tables(result))
    if written and args.format != "json":
        sys.stdout.write("".join(f"{path}\n" for path in written))
    return code
