"""Helpers for the plugin's acceptance tests: ``--spyre`` runs go to a subprocess, so the import
order is real and nothing the device registers leaks into this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_spyre(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--spyre", *args)


def read_report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def summary_lines(lines: list[str]) -> list[str]:
    """The lines of the ``spyre summary`` section (up to the next section)."""
    start = next(i for i, line in enumerate(lines) if "spyre summary" in line)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("===", "---"))),
        len(lines),
    )
    return lines[start:end]


@dataclass
class Run:
    """A finished ``pytest`` subprocess run, with its JSON report when one was asked for."""

    ret: int
    lines: list[str]
    stderr: str
    report: dict[str, Any] | None

    def fnmatch_lines(self, patterns: list[str]) -> None:
        pytest.LineMatcher(self.lines).fnmatch_lines(patterns)

    @property
    def summary(self) -> list[str]:
        return summary_lines(self.lines)


def pytest_subprocess(directory: Path, *args: str, report: Path | None = None) -> Run:
    """Run ``python -m pytest ARGS`` in ``directory`` (adds ``--spyre-report`` if asked)."""
    extra = [f"--spyre-report={report}"] if report is not None else []
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRANSFORMERS_TEST"))
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, *extra],
        cwd=directory, capture_output=True, text=True, check=False, env=env, timeout=600,
    )  # fmt: skip
    data = read_report(report) if report is not None and report.exists() else None
    return Run(done.returncode, done.stdout.splitlines(), done.stderr, data)
