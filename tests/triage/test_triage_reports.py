"""Sweep results: the JSON schema, the terminal tables and the offline HTML page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spyre_adapters.enablement.results import Category, DeviceRun, GapHit, RunError, TriageResult
from spyre_adapters.enablement.sweep import SweepReport, report_tables, write_html

RELEASES = ["2026.03", "2026.05"]


def blocked(family: str, release: str, gap: str) -> TriageResult:
    run = DeviceRun(
        ran=False,
        error=RunError("lowering", "SpyreLoweringError", "x", gap, "aten.x.default", "m.a"),
        gaps=[GapHit(gap, "aten.x.default", "m.a", 1, raised=True)],
    )
    return TriageResult(
        family,
        release,
        "realistic",
        Category.BLOCKED,
        f"gap `{gap}`",
        stock=run,
        adapted=run,
        bridging={gap: []},
        blockers=list(run.gaps),
    )


@pytest.fixture
def report() -> SweepReport:
    results = [
        TriageResult("llama", "2026.03", "realistic", Category.ADAPTED, "with rope"),
        TriageResult("llama", "2026.05", "realistic", Category.NATIVE, "no adapter"),
        blocked("vit", "2026.03", "conv2d"),
        blocked("vit", "2026.05", "conv2d"),
        blocked("bert", "2026.03", "indirect-access"),
        TriageResult("bert", "2026.05", "realistic", Category.MISMATCH, "cosine 0.5"),
        TriageResult("esm", "2026.03", "realistic", Category.BUILD_FAILED, "config"),
        TriageResult("esm", "2026.05", "realistic", Category.BUILD_FAILED, "config"),
    ]
    return SweepReport(
        releases=RELEASES,
        families=["bert", "esm", "llama", "vit"],
        preset="realistic",
        layout_checks=True,
        results=results,
        jobs=2,
        wall_seconds=12.5,
    )


def test_json_document_follows_the_schema(report: SweepReport) -> None:
    data = json.loads(json.dumps(report.to_json()))  # JSON-serialisable, no NaN
    assert data["schema_version"] == 1
    assert data["kind"] == "sweep"
    assert data["releases"] == RELEASES
    for key in ("preset", "layout_checks", "families", "jobs", "timeout", "wall_seconds"):
        assert key in data
    assert {"transformers", "torch"} <= set(data["versions"])
    assert data["summary"]["2026.03"]["enabled"] == 1
    assert data["summary"]["2026.03"]["blocked"] == 2
    assert data["summary"]["2026.05"]["built"] == 3  # esm did not build
    assert data["summary"]["2026.05"]["total"] == 4
    assert set(data["summary"]["2026.05"]) >= {c.value for c in Category}
    assert data["top_blockers"][0] == {"gap": "conv2d", "pairs": 2, "families": ["vit"]}
    row = data["results"][0]
    for key in (
        "family",
        "release",
        "category",
        "enabled",
        "detail",
        "stock",
        "adapted",
        "bridging",
        "blockers",
        "suggestions",
        "seconds",
    ):
        assert key in row
    assert [(r["family"], r["release"]) for r in data["results"]] == sorted(
        (r["family"], r["release"]) for r in data["results"]
    )


def test_json_round_trip(report: SweepReport) -> None:
    again = SweepReport.from_json(report.to_json())
    assert again.summary() == report.summary()
    assert again.top_blockers() == report.top_blockers()
    with pytest.raises(ValueError, match="schema_version"):
        SweepReport.from_json({"kind": "sweep", "schema_version": 99})


def test_tables_show_matrix_and_summary(report: SweepReport) -> None:
    grid, summary, gaps = report_tables(report)
    assert grid.columns == ["family", *RELEASES]
    assert ["vit", "blocked", "blocked"] in grid.rows
    assert summary.rows[0][:2] == ["2026.03", "1"]
    assert gaps.rows[0][:2] == ["conv2d", "2"]
    assert len(report_tables(report, matrix=False)) == 2


def test_html_has_the_grid_and_the_chart_and_no_network(
    report: SweepReport, tmp_path: Path
) -> None:
    page = tmp_path / "sweep.html"
    write_html(report, page)
    text = page.read_text("utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://", text)  # viewable offline: no network assets
    assert "<script" not in text
    cells = re.findall(r'data-category="([a-z-]+)"', text)
    assert len(cells) == len(report.results)
    assert cells.count("blocked") == 3
    assert "<svg" in text
    assert len(re.findall(r"<rect ", text)) == 2 * len(RELEASES)  # native + adapted per release
    assert "conv2d" in text
