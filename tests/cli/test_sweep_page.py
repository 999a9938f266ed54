"""The sweep page's labels are readable: WCAG contrast from the palette, the page and Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spyre_adapters.enablement._sweep_html import CATEGORY_COLOURS, CATEGORY_TEXT, render
from spyre_adapters.enablement.results import Category, TriageResult
from spyre_adapters.enablement.sweep import SweepReport

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / ".ci" / "check_sweep_page.py"
#: WCAG 2 AA, normal text.
AA = 4.5


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # WCAG's borderline


def test_every_category_has_a_colour_and_a_label_colour() -> None:
    values = {c.value for c in Category}
    assert set(CATEGORY_COLOURS) == values
    assert set(CATEGORY_TEXT) == values


@pytest.mark.parametrize("category", [c.value for c in Category])
def test_every_label_colour_reaches_4_5_to_1(category: str) -> None:
    ratio = contrast(CATEGORY_TEXT[category], CATEGORY_COLOURS[category])
    assert ratio >= AA, f"{category}: {ratio:.2f}:1"


def page() -> str:
    results = [TriageResult(f"f-{c.value}", "2026.09", "tiny", c, "x") for c in Category]
    report = SweepReport(["2026.09"], sorted(r.family for r in results), "tiny", True, results)
    return render(report.to_json())


def test_the_page_colours_each_label_from_the_palette() -> None:
    text = page()
    legend = re.findall(
        r'<span style="background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})" data-legend="([a-z-]+)"',
        text,
    )
    cells = re.findall(
        r'<td class="cell" style="background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})"[^>]*'
        r'data-category="([a-z-]+)"',
        text,
    )
    for found in (legend, cells):
        assert sorted(name for *_, name in found) == sorted(c.value for c in Category)
        for background, colour, name in found:
            assert contrast(colour, background) >= AA, name


def _chromium() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("google-chrome")


@pytest.mark.skipif(
    _chromium() is None,
    reason="headless Chromium not installed (apt-get install -y chromium); "
    ".ci/check_sweep_page.py runs the same check on its own",
)
def test_chromium_renders_every_label_readable(tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    done = subprocess.run(
        [sys.executable, str(CHECK), "--json", "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout)["labels"]
    assert sorted((r["where"], r["category"]) for r in rows) == sorted(
        (where, c.value) for where in ("grid", "legend") for c in Category
    )
    assert all(r["contrast"] >= AA for r in rows)
    assert shot.stat().st_size > 10_000  # a real screenshot of the page
