"""What a sweep report shows people: the terminal tables (:func:`report_tables`: the
family x release matrix, the families per release, the gaps without an adapter) and the offline
HTML page (:func:`write_html`, drawn by :mod:`spyre_adapters.enablement._sweep_html`).
"""

from __future__ import annotations

from pathlib import Path

from spyre_adapters.enablement._sweep_report import SweepReport
from spyre_adapters.tables import TableData

__all__ = ["report_tables", "write_html"]


def report_tables(report: SweepReport, *, matrix: bool = True) -> list[TableData]:
    """The terminal tables: the matrix (family x release) and the per-release summary."""
    tables = []
    if matrix:
        grid = TableData(
            f"Enablement matrix ({report.preset} sizes, layout checks "
            f"{'on' if report.layout_checks else 'off'})",
            ["family", *report.releases],
        )
        for family in report.families:
            row = [family]
            for release in report.releases:
                result = report.result(family, release)
                row.append(result.category.value if result is not None else "-")
            grid.rows.append(row)
        tables.append(grid)
    summary = report.summary()
    table = TableData(
        "Families per release",
        [
            "release",
            "enabled",
            "native",
            "adapted",
            "blocked",
            "mismatch",
            "other",
            "built",
            "swept",
        ],
        caption=f"wall {report.wall_seconds:.1f} s; mean {report.mean_seconds():.2f} s per "
        f"(family, release); {report.jobs} workers",
    )
    for release in report.releases:
        counts = summary[release]
        other = counts["built"] - sum(
            counts[c] for c in ("native", "adapted", "blocked", "mismatch")
        )
        table.rows.append(
            [
                release,
                str(counts["enabled"]),
                str(counts["native"]),
                str(counts["adapted"]),
                str(counts["blocked"]),
                str(counts["mismatch"]),
                str(other),
                str(counts["built"]),
                str(counts["total"]),
            ]
        )
    tables.append(table)
    blockers = report.top_blockers()
    if blockers:
        gaps = TableData("Gaps without an adapter (blocked pairs)", ["gap", "pairs", "families"])
        for item in blockers:
            names = item["families"]
            shown = ", ".join(names[:8]) + (f" (+{len(names) - 8})" if len(names) > 8 else "")
            gaps.rows.append([item["gap"], str(item["pairs"]), shown])
        tables.append(gaps)
    return tables


def write_html(report: SweepReport, path: Path) -> None:
    """Write the offline HTML page (colour grid + chart of families enabled per release),
    atomically (:func:`spyre_adapters._outputs.write_text`)."""
    from spyre_adapters._outputs import write_text
    from spyre_adapters.enablement._sweep_html import render

    write_text(path, render(report.to_json()))
