"""Helpers for the plugin's acceptance tests: ``--spyre`` runs go to a subprocess, so the import
order is real and nothing the device registers leaks into this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_spyre(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--spyre", *args)


def read_report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def summary_lines(result: pytest.RunResult) -> list[str]:
    """The lines of the ``spyre summary`` section (up to the next section)."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "spyre summary" in line)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("===", "---"))),
        len(lines),
    )
    return lines[start:end]
