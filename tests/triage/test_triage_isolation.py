"""Worker isolation: crashes, hangs and errors in a worker become fixed categories."""

from __future__ import annotations

import os

import pytest
from triage_standins import (
    crashing_worker,
    exiting_worker,
    hanging_worker,
    mixed_worker,
    raising_worker,
    verdict_worker,
)

from spyre_adapters.enablement._isolation import run_isolated
from spyre_adapters.enablement.results import Category
from spyre_adapters.enablement.sweep import isolated_triage, run_sweep

RELEASES = ["2026.05", "2026.09"]


def test_run_isolated_returns_the_value() -> None:
    outcome = run_isolated(os.getpid, (), timeout=60)
    assert outcome.status == "ok"
    assert outcome.value != os.getpid()  # it really ran in another process


def test_a_killed_worker_is_worker_crashed() -> None:
    results = isolated_triage("alpha", RELEASES, timeout=60, worker=crashing_worker)
    assert [r.category for r in results] == [Category.WORKER_CRASHED] * 2
    assert [r.release for r in results] == RELEASES


def test_an_exiting_worker_is_worker_crashed() -> None:
    (result,) = isolated_triage("alpha", RELEASES[:1], timeout=60, worker=exiting_worker)
    assert result.category is Category.WORKER_CRASHED
    assert "code 3" in result.detail


def test_a_hanging_worker_is_killed_as_worker_timeout() -> None:
    (result,) = isolated_triage("alpha", RELEASES[:1], timeout=1.0, worker=hanging_worker)
    assert result.category is Category.WORKER_TIMEOUT
    assert result.seconds < 30


def test_a_raising_worker_is_internal_error() -> None:
    (result,) = isolated_triage("alpha", RELEASES[:1], timeout=60, worker=raising_worker)
    assert result.category is Category.INTERNAL_ERROR
    assert "stand-in failure for alpha" in result.detail


def test_one_bad_family_does_not_take_the_sweep_down() -> None:
    report = run_sweep(
        ["ok1", "crash", "hang", "ok2"], RELEASES, jobs=2, timeout=5.0, worker=mixed_worker
    )
    by_family = {r.family: r.category for r in report.results if r.release == "2026.05"}
    assert by_family == {
        "ok1": Category.NATIVE,
        "ok2": Category.NATIVE,
        "crash": Category.WORKER_CRASHED,
        "hang": Category.WORKER_TIMEOUT,
    }
    assert len(report.results) == 8


def test_sweep_results_follow_the_worker() -> None:
    report = run_sweep(["alpha", "beta", "gamma", "delta"], RELEASES, jobs=2, worker=verdict_worker)
    summary = report.summary()
    assert summary["2026.05"]["enabled"] == 2  # alpha native, beta adapted
    assert summary["2026.05"]["blocked"] == 1
    assert summary["2026.05"]["mismatch"] == 1
    assert summary["2026.09"]["native"] == 4
    assert report.wall_seconds > 0


@pytest.mark.parametrize("jobs", [1, 3])
def test_every_pair_is_reported_once(jobs: int) -> None:
    families = ["alpha", "beta", "gamma"]
    report = run_sweep(families, RELEASES, jobs=jobs, worker=verdict_worker)
    pairs = sorted((r.family, r.release) for r in report.results)
    assert pairs == sorted((f, r) for f in families for r in RELEASES)
