"""The offline HTML page of a sweep: the matrix as a colour grid and a chart per release.

Self-contained: inline CSS and an inline SVG bar chart; no script, font or image is fetched,
so the page is viewable offline and safe to attach to a CI run.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["CATEGORY_COLOURS", "CATEGORY_TEXT", "render"]

#: Grid colour of each category (stable: the legend of older pages stays valid).
CATEGORY_COLOURS: Mapping[str, str] = {
    "native": "#1a9850",
    "adapted": "#91cf60",
    "mismatch": "#fc8d59",
    "blocked": "#d73027",
    "not-implemented-adapter": "#fee08b",
    "adapter-failed": "#f46d43",
    "device-error": "#9e0142",
    "build-failed": "#bdbdbd",
    "reference-failed": "#d9d9d9",
    "worker-crashed": "#5e4fa2",
    "worker-timeout": "#3288bd",
    "internal-error": "#000000",
}

#: Label colour on each category's colour (legend and grid): black or white, whichever
#: contrasts more; every pair reaches WCAG's 4.5:1 for normal text (checked by the tests).
CATEGORY_TEXT: Mapping[str, str] = {
    "native": "#000000",
    "adapted": "#000000",
    "mismatch": "#000000",
    "blocked": "#ffffff",
    "not-implemented-adapter": "#000000",
    "adapter-failed": "#000000",
    "device-error": "#ffffff",
    "build-failed": "#000000",
    "reference-failed": "#000000",
    "worker-crashed": "#ffffff",
    "worker-timeout": "#000000",
    "internal-error": "#ffffff",
}

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
table.grid { border-collapse: collapse; font-size: 12px; }
table.grid th, table.grid td { border: 1px solid #fff; padding: 2px 6px; }
table.grid th { background: #eee; position: sticky; top: 0; }
table.grid td.family { font-family: monospace; background: #f7f7f7; }
table.grid td.cell { min-width: 4.5em; text-align: center; color: #111; }
.legend span { display: inline-block; margin: 2px 8px 2px 0; padding: 2px 6px; font-size: 12px; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary td, table.summary th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
.meta { color: #555; font-size: 13px; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _chart(releases: list[str], summary: Mapping[str, Mapping[str, int]]) -> str:
    """Stacked bars per release: native and adapted families (SVG)."""
    bar, gap, height, top, left = 56, 18, 220, 20, 40
    highest = max([summary[r]["enabled"] for r in releases] + [1])
    width = left + len(releases) * (bar + gap) + gap
    parts = [
        f'<svg width="{width}" height="{height + 60}" '
        f'role="img" aria-label="families enabled per release">',
        f'<line x1="{left}" y1="{top + height}" x2="{width}" y2="{top + height}" stroke="#888"/>',
    ]
    for index, release in enumerate(releases):
        counts = summary[release]
        x = left + gap + index * (bar + gap)
        base = top + height
        for category in ("native", "adapted"):
            value = counts.get(category, 0)
            h = round(height * value / highest)
            base -= h
            parts.append(
                f'<rect x="{x}" y="{base}" width="{bar}" height="{h}" '
                f'fill="{CATEGORY_COLOURS[category]}"><title>{_e(release)}: {value} '
                f"{category}</title></rect>"
            )
        parts.append(
            f'<text x="{x + bar / 2}" y="{base - 4}" font-size="12" text-anchor="middle">'
            f"{counts.get('enabled', 0)}</text>"
        )
        parts.append(
            f'<text x="{x + bar / 2}" y="{top + height + 16}" font-size="12" '
            f'text-anchor="middle">{_e(release)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render(document: Mapping[str, Any]) -> str:
    """The HTML page for a sweep JSON document (schema of :mod:`spyre_adapters.enablement._sweep_report`)."""
    releases: list[str] = list(document["releases"])
    families: list[str] = list(document["families"])
    summary: Mapping[str, Mapping[str, int]] = document["summary"]
    cells: dict[tuple[str, str], Mapping[str, Any]] = {
        (r["family"], r["release"]): r for r in document["results"]
    }
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>spyre-adapters enablement matrix</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Enablement matrix</h1>",
        f'<p class="meta">{len(families)} families x {len(releases)} releases; sizes '
        f"{_e(document['preset'])}; layout checks {'on' if document['layout_checks'] else 'off'}; "
        f"wall {document['wall_seconds']:.1f} s, mean {document['mean_seconds']:.2f} s per "
        f"(family, release), {document['jobs']} workers; "
        f"{_e(', '.join(f'{k} {v}' for k, v in document.get('versions', {}).items()))}</p>",
        "<h2>Families enabled per release (native + adapted)</h2>",
        _chart(releases, summary),
        '<h2>Per release</h2><table class="summary"><tr><th>release</th>',
    ]
    categories = list(CATEGORY_COLOURS)
    out.append("".join(f"<th>{_e(c)}</th>" for c in ["enabled", *categories, "built", "total"]))
    out.append("</tr>")
    for release in releases:
        counts = summary[release]
        out.append(f"<tr><th>{_e(release)}</th>")
        out.append(
            "".join(
                f"<td>{counts.get(c, 0)}</td>" for c in ["enabled", *categories, "built", "total"]
            )
        )
        out.append("</tr>")
    out.append("</table>")
    out.append('<h2>Matrix</h2><div class="legend">')
    out.extend(
        f'<span style="background:{colour};color:{CATEGORY_TEXT[name]}" '
        f'data-legend="{_e(name)}">{_e(name)}</span>'
        for name, colour in CATEGORY_COLOURS.items()
    )
    out.append('</div><table class="grid"><tr><th>family</th>')
    out.extend(f"<th>{_e(r)}</th>" for r in releases)
    out.append("</tr>")
    for family in families:
        out.append(f'<tr><td class="family">{_e(family)}</td>')
        for release in releases:
            result = cells.get((family, release))
            if result is None:
                out.append('<td class="cell">-</td>')
                continue
            category = result["category"]
            colour = CATEGORY_COLOURS.get(category, "#ffffff")
            text = CATEGORY_TEXT.get(category, "#000000")
            tip = f"{family} @ {release}: {category}\n{result.get('detail', '')}"
            short = {"not-implemented-adapter": "no-impl"}.get(category, category)
            out.append(
                f'<td class="cell" style="background:{colour};color:{text}" title="{_e(tip)}" '
                f'data-category="{_e(category)}">{_e(short)}</td>'
            )
        out.append("</tr>")
    out.append("</table>")
    blockers = document.get("top_blockers", [])
    if blockers:
        out.append('<h2>Gaps without an adapter</h2><table class="summary">')
        out.append("<tr><th>gap</th><th>blocked pairs</th><th>families</th></tr>")
        for item in blockers:
            out.append(
                f"<tr><td>{_e(item['gap'])}</td><td>{item['pairs']}</td>"
                f'<td style="text-align:left">{_e(", ".join(item["families"]))}</td></tr>'
            )
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
