"""Check the sweep's HTML page in headless Chromium: every label must be readable.

Renders a sample sweep page with one grid cell of every category, opens it in headless
Chromium with a small script appended that reads, for each legend label and grid cell, the
text and background colours *the browser computed* and their WCAG 2 contrast ratio, and fails
when any is below 4.5:1 (WCAG AA for normal text). It also saves a screenshot of the page as
shipped (no script) for a person to look at.

    python .ci/check_sweep_page.py                       # prints one line per label
    python .ci/check_sweep_page.py --screenshot page.png --json

Needs a Chromium binary (Debian: ``apt-get install -y chromium``; ``--chromium PATH`` or
``$CHROMIUM`` to choose one). Exit status: 0 every label readable, 1 some are not, 2 no
Chromium or it failed. Nothing is fetched: the page is offline and Chromium runs with
networking features off and a throw-away profile.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: WCAG 2 AA minimum contrast for normal text.
MIN_CONTRAST = 4.5

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
)

# Computed colours and contrast of every label, written into the page as JSON.
_PROBE = """
<script>
function channel(c) { c /= 255; return c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }
function luminance(rgb) {
  const [r, g, b] = rgb.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
  return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
}
function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}
const rows = [];
for (const el of document.querySelectorAll(".legend span, td.cell[data-category]")) {
  const style = getComputedStyle(el);
  rows.push({
    where: el.matches(".legend span") ? "legend" : "grid",
    label: el.textContent,
    category: el.dataset.legend || el.dataset.category || el.textContent,
    color: style.color,
    background: style.backgroundColor,
    contrast: contrast(style.color, style.backgroundColor),
  });
}
const out = document.createElement("pre");
out.id = "label-contrast";
out.textContent = JSON.stringify(rows);
document.body.appendChild(out);
</script>
"""


def sample_page() -> str:
    """A sweep page with one family per category, so every colour is in the grid."""
    from spyre_adapters.enablement._sweep_html import render
    from spyre_adapters.enablement.results import Category, TriageResult
    from spyre_adapters.enablement.sweep import SweepReport

    results = [
        TriageResult(f"family-{c.value}", "2026.09", "realistic", c, "sample") for c in Category
    ]
    report = SweepReport(
        releases=["2026.09"],
        families=sorted(r.family for r in results),
        preset="realistic",
        layout_checks=True,
        results=results,
    )
    return render(report.to_json())


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium binary: ``explicit``, ``$CHROMIUM``, or one on ``PATH``."""
    for candidate in (explicit, os.environ.get("CHROMIUM")):
        if candidate:
            return candidate
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def label_contrast(
    page: str, chromium: str, screenshot: Path | None = None
) -> list[dict[str, Any]]:
    """Every label of ``page`` with the colours Chromium computed and their contrast ratio.
    Raises :class:`RuntimeError` when Chromium fails."""
    with tempfile.TemporaryDirectory(prefix="sweep-page-") as tmp:
        root = Path(tmp)
        probe = root / "probe.html"
        probe.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
        done = _run(chromium, root / "profile", "--dump-dom", probe.as_uri())
        if done.returncode != 0:
            raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr.strip()[-500:]}")
        marker = '<pre id="label-contrast">'
        start = done.stdout.find(marker)
        if start < 0:
            raise RuntimeError("chromium ran but the probe wrote nothing (scripts disabled?)")
        text = done.stdout[start + len(marker) : done.stdout.index("</pre>", start)]
        rows: list[dict[str, Any]] = json.loads(html.unescape(text))
        if screenshot is not None:
            shipped = root / "page.html"
            shipped.write_text(page, encoding="utf-8")
            shot = _run(
                chromium,
                root / "profile",
                f"--screenshot={screenshot.absolute()}",
                "--window-size=1100,900",
                shipped.as_uri(),
            )
            if shot.returncode != 0 or not screenshot.exists():
                raise RuntimeError(f"chromium took no screenshot: {shot.stderr.strip()[-500:]}")
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chromium", help="the Chromium binary (default: $CHROMIUM or PATH)")
    parser.add_argument("--screenshot", type=Path, help="also save a PNG of the page here")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "no Chromium found (apt-get install -y chromium, or --chromium PATH)", file=sys.stderr
        )
        return 2
    try:
        rows = label_contrast(sample_page(), chromium, args.screenshot)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"chromium failed: {error}", file=sys.stderr)
        return 2
    unreadable = [r for r in rows if r["contrast"] < MIN_CONTRAST]
    if args.json:
        print(json.dumps({"min_contrast": MIN_CONTRAST, "labels": rows}, indent=1))
    else:
        for row in rows:
            verdict = "ok" if row["contrast"] >= MIN_CONTRAST else "UNREADABLE"
            print(
                f"{row['where']:6} {row['category']:24} {row['contrast']:5.2f}:1  "
                f"{row['color']} on {row['background']}  {verdict}"
            )
        print(f"{len(rows)} labels, {len(unreadable)} below {MIN_CONTRAST}:1")
    return 1 if unreadable or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
