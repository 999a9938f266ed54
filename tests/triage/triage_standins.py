"""Stand-in sweep workers (module level, so isolated worker processes can import them)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from spyre_adapters.enablement.results import Category, TriageResult

#: The category each stand-in family reports, at every release.
VERDICTS = {
    "alpha": Category.NATIVE,
    "beta": Category.ADAPTED,
    "gamma": Category.BLOCKED,
    "delta": Category.MISMATCH,
}


def verdict_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    """Reports ``VERDICTS[family]``; at the newest release every family is native."""
    rows = []
    for release in releases:
        category = VERDICTS[family] if release != releases[-1] else Category.NATIVE
        result = TriageResult(family, release, preset, category, f"stand-in {category.value}")
        rows.append(result.to_json())
    return rows


def crashing_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    os.kill(os.getpid(), signal.SIGKILL)
    return []


def exiting_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    os._exit(3)


def hanging_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    time.sleep(600)
    return []


def raising_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    raise ValueError(f"stand-in failure for {family}")


def mixed_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    """``crash`` dies, ``hang`` sleeps, anything else is native."""
    if family == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if family == "hang":
        time.sleep(600)
    return [
        TriageResult(family, r, preset, Category.NATIVE, "stand-in").to_json() for r in releases
    ]
