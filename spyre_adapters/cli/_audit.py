"""``spyre-adapters audit``: every adapter's status at a release, as a CI gate.

The report and its JSON schema are documented in :mod:`spyre_adapters.audit`. Exit status: 1
when an adapter is overdue (or, with ``--strict``, retirable or retired), else 0. With
``--from R1 --to R2`` the output is the diff between the two releases and the gate is judged at
R2. ``--waivers FILE`` reads waivers (format in :mod:`spyre_adapters.waivers`), judged on
``--today`` (default: the current date); a waiver about an adapter or version that is not
installed is invalid data (exit 3). Older versions that the resolved version supersedes at the
release are listed with status ``superseded`` (never a gate finding).

``--verify`` runs :func:`spyre_adapters.enablement.verify.verify_retirable` (imported only then: it
builds models) and adds a ``verification`` list to the document, one
:meth:`~spyre_adapters.enablement.verify.RetirementVerdict.to_json` per retirable or retired adapter:
``adapter``, ``version``, ``release``, ``verified``, ``outcome`` (``verified``, ``refuted`` or
``unproven``), ``detail`` and ``families`` (per family: ``family``, ``evidence``, ``passed``,
``detail``). A retirable adapter whose outcome is not ``verified`` is a gate finding.
"""

from __future__ import annotations

import argparse
import datetime as _dt
from typing import Any

from spyre_adapters.audit import AuditReport, audit_diff, audit_release
from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, diagnose, emit
from spyre_adapters.lifecycle import AdapterStatus, Lifecycle
from spyre_adapters.registry import Registry
from spyre_adapters.waivers import Waiver, load_waivers

__all__ = ["add_parser", "run"]


def _date(text: str) -> _dt.date:
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="every adapter's status at a release; exit 1 on gate findings",
        description="Every adapter's status at a stack release (active, retirable, retired, "
        "permanent, out-of-range, overdue), the release where each becomes retirable, and "
        "the gate: overdue adapters fail it (and retirable/retired ones with --strict).",
    )
    parser.add_argument(
        "--stack", metavar="R", help="release name or release TOML file (default: the newest)"
    )
    parser.add_argument("--from", dest="from_stack", metavar="R1", help="diff: from release R1")
    parser.add_argument("--to", dest="to_stack", metavar="R2", help="diff: to release R2")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="retirable and retired scaffolding fail the gate too",
    )
    parser.add_argument("--waivers", metavar="FILE", help="waivers file (TOML)")
    parser.add_argument(
        "--today", type=_date, metavar="YYYY-MM-DD", help="judge waivers on this date"
    )
    parser.add_argument(
        "--no-auto-retire",
        dest="auto_retire",
        action="store_false",
        help="keep retirable scaffolding applied (status retirable instead of retired)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="re-run retirable adapters' families without them to prove retirement",
    )
    add_output_options(parser)


def _row(row: AdapterStatus) -> list[str]:
    return [
        row.name,
        str(row.version),
        row.status.value,
        ", ".join(row.open_gaps) or "-",
        row.retirable_in or "never",
        row.reason,
    ]


def _table(report: AuditReport) -> TableData:
    counts = ", ".join(f"{n} {s}" for s, n in report.counts().items() if n)
    rows: list[list[str]] = []
    for row in report.rows:
        rows.append(_row(row))
        rows += [_row(old) for old in report.superseded if old.name == row.name]
    return TableData(
        f"Adapters at stack {report.release}",
        ["adapter", "version", "status", "open gaps", "retirable in", "why"],
        rows,
        caption=counts or "no adapters installed",
        status_column=2,
        folding=frozenset({3, 5}),
    )


def run(args: argparse.Namespace) -> int:
    if (args.from_stack is None) != (args.to_stack is None):
        diagnose("error: --from and --to go together (a diff between two releases)")
        return ExitCode.USAGE
    if args.stack is not None and args.from_stack is not None:
        diagnose("error: use either --stack R or --from R1 --to R2, not both")
        return ExitCode.USAGE
    registry = registry_for(args, runs_adapters=bool(args.verify))
    waivers: list[Waiver] = load_waivers(args.waivers) if args.waivers else []
    options: dict[str, Any] = {
        "waivers": waivers,
        "today": args.today,
        "auto_retire": args.auto_retire,
        "strict": args.strict,
    }
    if args.from_stack is not None:
        diff = audit_diff(registry, args.from_stack, args.to_stack, **options)
        table = TableData(
            f"Changes from stack {diff.before.release} to {diff.after.release}",
            ["adapter", diff.before.release, diff.after.release],
            caption=f"{len(diff.changes)} adapters change",
        )
        for change in diff.changes:
            table.rows.append(
                [
                    change.name,
                    _side(change.before),
                    _side(change.after),
                ]
            )
        emit(args, diff.to_json(), [table, _table(diff.after)])
        report = diff.after
    else:
        report = audit_release(registry, args.stack, **options)
        document = report.to_json()
        tables = [_table(report)]
        failed_verdicts = 0
        if args.verify:
            failed_verdicts = _verify(report, registry, document, tables)
        emit(args, document, tables)
        if failed_verdicts:
            diagnose(f"{failed_verdicts} retirable adapter(s) failed verification")
            return ExitCode.FINDINGS
    findings = report.findings()
    for finding in findings:
        diagnose(finding.message)
    if findings:
        diagnose(f"gate failed at stack {report.release}: {len(findings)} finding(s)")
        return ExitCode.FINDINGS
    return ExitCode.OK


def _side(row: AdapterStatus | None) -> str:
    return "-" if row is None else f"{row.version} {row.status.value}"


def _verify(
    report: AuditReport, registry: Registry, document: dict[str, Any], tables: list[TableData]
) -> int:
    from spyre_adapters.enablement import verify

    release = Lifecycle(registry).release(report.release)
    verdicts = list(verify.verify_retirable(report, release, registry))
    document["verification"] = [v.to_json() for v in verdicts]
    tables.append(
        TableData(
            f"Retirement verification at stack {report.release}",
            ["adapter", "outcome", "detail"],
            [[v.adapter, v.outcome.value, str(v.detail)] for v in verdicts],
        )
    )
    retirable = {row.name for row in report.retirable()}
    failed = [v for v in verdicts if v.adapter in retirable and not v.verified]
    for verdict in failed:
        diagnose(
            f"{verdict.adapter} is not verified retirable ({verdict.outcome.value}): {verdict.detail}"
        )
    return len(failed)
