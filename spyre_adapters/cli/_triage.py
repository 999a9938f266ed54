"""``spyre-adapters triage FAMILY``: what does it take to run a Transformers family at a release?

Builds a small instance of ``FAMILY`` (a Transformers ``model_type``) from its config —
realistic, stick-aligned sizes by default, Transformers' own tiny tester sizes with ``--tiny``
— and, for each ``--stack`` release (default: the newest built-in one), runs a forward on the
emulated device stock, then with the adapters the lifecycle resolves there. See
:mod:`spyre_adapters.enablement.triage` for the runs, the comparison with the CPU and the verdicts.

Output: a verdict per release, every gap met with its module path and the adapters that bridge
it, the adapted run (adapters applied, cosine, top-1), what still blocks it, and with
``--suggest-manifest`` a manifest skeleton for each blocking gap that no adapter bridges.
JSON (``--format json``, ``schema_version`` 1)::

    {"schema_version": 1, "kind": "triage", "family": "llama", "preset": "realistic",
     "layout_checks": true, "results": [<one result per release, as in the sweep schema>]}

Exit status: 0 when the family is ``native`` or ``adapted`` at every release asked, 1
otherwise (a finding), 2 for usage errors (unknown family or release).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from spyre_adapters.cli._context import registry_for, unknown_family
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, diagnose, emit
from spyre_adapters.stacks import release_of

if TYPE_CHECKING:
    from spyre_adapters.enablement.results import TriageResult

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "triage",
        help="run one Transformers family on the emulated device: gaps, adapters, verdict",
        description="Build a small instance of a Transformers model_type from its config, run it "
        "on the emulated Spyre at each release stock and with the resolved adapters, and report "
        "the gaps met (with module paths), the adapters that bridge them, whether the adapted "
        "model runs and matches the CPU, and what still blocks it. Exit 0 when it runs and "
        "matches at every release asked, 1 otherwise.",
    )
    parser.add_argument("family", help="a Transformers model_type, e.g. llama")
    parser.add_argument(
        "--stack",
        action="append",
        metavar="R",
        help="stack release (name or release file); repeatable; default: the newest built-in",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="keep Transformers' own tiny tester sizes (not stick aligned) instead of realistic "
        "hardware sizes",
    )
    parser.add_argument(
        "--testers",
        type=Path,
        metavar="DIR",
        help="a Transformers test tree: take the family's config and inputs from its model "
        "tester (scaled to realistic widths unless --tiny)",
    )
    parser.add_argument(
        "--no-layout-checks",
        dest="layout_checks",
        action="store_false",
        help="turn the device's layout rules off (functional mode)",
    )
    parser.add_argument(
        "--suggest-manifest",
        action="store_true",
        help="print a manifest skeleton (TOML) for each blocking gap no adapter bridges",
    )
    add_output_options(parser)


def _releases(args: argparse.Namespace) -> list[str]:
    if args.stack:
        return list(args.stack)
    from spyre_adapters.stacks import default_catalogue

    return [default_catalogue().releases[-1].name]


def _tables(results: list[TriageResult]) -> list[TableData]:
    verdicts = TableData(
        f"Triage of {results[0].family} ({results[0].preset} sizes)",
        ["release", "verdict", "detail"],
    )
    gaps = TableData(
        "Gaps met (stock run; `raised` ones stop the stack)",
        ["release", "gap", "module path", "op", "count", "raised", "bridged by"],
    )
    adapted = TableData(
        "Runs on the device",
        ["release", "run", "adapters applied", "runs", "cosine", "top-1", "matches"],
    )
    blockers = TableData("Still blocking", ["release", "gap", "module path", "op", "bridged by"])
    for result in results:
        verdicts.rows.append([result.release, result.category.value, result.detail])
        if result.stock is not None:
            for hit in result.stock.gaps:
                gaps.rows.append(
                    [
                        result.release,
                        hit.gap,
                        hit.module_path or "-",
                        hit.op or "-",
                        str(hit.count),
                        "yes" if hit.raised else "no",
                        ", ".join(result.bridging.get(hit.gap, [])) or "none",
                    ]
                )
        for label, device_run in (("stock", result.stock), ("adapted", result.adapted)):
            if device_run is None:
                continue
            comparison = device_run.comparison
            adapted.rows.append(
                [
                    result.release,
                    label,
                    ", ".join(device_run.adapters) or "-",
                    "yes" if device_run.ran else "no",
                    f"{comparison.cosine:.5f}" if comparison is not None else "-",
                    "-"
                    if comparison is None or comparison.top1 is None
                    else f"{comparison.top1:.3f} ({comparison.scored} scored)",
                    "-" if comparison is None else ("yes" if comparison.matches else "no"),
                ]
            )
        for hit in result.blockers:
            blockers.rows.append(
                [
                    result.release,
                    hit.gap,
                    hit.module_path or "-",
                    hit.op or "-",
                    ", ".join(result.bridging.get(hit.gap, [])) or "none",
                ]
            )
    tables = [verdicts, gaps, adapted]
    if blockers.rows:
        tables.append(blockers)
    return tables


def run(args: argparse.Namespace) -> int:
    # torch and Transformers only here: the parser is built for every command
    from spyre_adapters.enablement.families import build_family
    from spyre_adapters.enablement.size_presets import REALISTIC, TINY, FamilyBuildError
    from spyre_adapters.enablement.triage import build_variants, triage

    problem = unknown_family(args.family, "llama, gpt2, bert")
    if problem is not None:
        diagnose(problem)
        return ExitCode.USAGE
    registry = registry_for(args)
    releases = [release_of(r, registry.catalogue) for r in _releases(args)]
    preset = TINY if args.tiny else REALISTIC
    if args.testers is not None and not (args.testers / "tests" / "models").is_dir():
        diagnose(f"error: --testers {args.testers}: no tests/models folder in it")
        return ExitCode.USAGE
    try:
        if args.testers is not None:
            from spyre_adapters.enablement.testers import build_from_tester

            built = build_from_tester(args.family, args.testers, scaled=not args.tiny)
        else:
            built = build_family(args.family, preset=preset)
    except FamilyBuildError as exc:
        diagnose(f"error: {exc}")
        return ExitCode.FINDINGS
    variants = build_variants(args.family, preset=preset)
    results = [
        triage(
            built,
            cast(Any, release),
            registry=registry,
            layout_checks=args.layout_checks,
            variants=variants,
        )
        for release in releases
    ]
    document: dict[str, Any] = {
        "schema_version": 1,
        "kind": "triage",
        "family": args.family,
        "preset": built.preset.name,
        "layout_checks": args.layout_checks,
        "results": [r.to_json() for r in results],
    }
    emit(args, document, _tables(results))
    if args.suggest_manifest and args.format != "json":
        for result in results:
            for gap, text in result.suggestions.items():
                sys.stdout.write(
                    f"\n# --- suggested manifest for gap `{gap}` at {result.release}\n"
                )
                sys.stdout.write(text)
    if all(r.category.enabled for r in results):
        return ExitCode.OK
    return ExitCode.FINDINGS
