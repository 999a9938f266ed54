"""The bundled ``examples/`` suite (Transformers style) under ``--spyre`` at two releases:
passing at the newest release, and where it fails, failing for a reason the report names
(a gap open at that release)."""

from __future__ import annotations

import shutil

import pytest
from plugin_runs import EXAMPLES, read_report, run_spyre

from spyre_sim.catalogue import builtin_catalogue


@pytest.fixture
def examples(pytester: pytest.Pytester) -> pytest.Pytester:
    for path in EXAMPLES.iterdir():
        if path.suffix in (".py", ".ini"):
            shutil.copy(path, pytester.path / path.name)
    return pytester


def _check_failures_named(data: dict[str, object], release: str) -> None:
    rel = builtin_catalogue().release(release)
    tests = data["tests"]
    assert isinstance(tests, list)
    for test in tests:
        if test["outcome"] in ("failed", "error"):
            blocked = test["blocked_by"]
            assert blocked is not None, f"{test['nodeid']} failed without a named gap"
            assert blocked["release"] == release
            assert rel.gap_open(blocked["gap"]), blocked


def test_llama_at_newest_release(examples: pytest.Pytester) -> None:
    """Unmarked on purpose: one real ``--spyre`` run of a tiny model, end to end."""
    newest = builtin_catalogue().newest.name
    report = examples.path / "r.json"
    result = run_spyre(
        examples, "-k", "llama", f"--spyre-report={report}", "-rs", "--spyre-compare"
    )
    data = read_report(report)
    assert data["stack"]["release"] == newest
    result.stdout.fnmatch_lines(["example suite: torch_device=spyre"])
    result.stdout.fnmatch_lines(
        ["*SKIPPED*test_modeling_llama.py:*: spyre: inference-only device*"]
    )
    _check_failures_named(data, newest)
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in data["tests"]}
    assert outcomes["test_training"] == "skipped"
    assert outcomes["test_model_forward"] == "passed", result.stdout.str()
    # --spyre-compare: each top-level forward replayed on a CPU copy (docs/STACK.md §7: cosine >= 0.99
    # on the device); generate's prefill is compared, its decode steps (KV cache) are not
    by_test = {t["nodeid"].rsplit("::", 1)[-1]: t["compare"] for t in data["tests"]}
    assert [a["model"] for a in by_test["test_model_forward"]] == ["LlamaModel"]
    assert len(by_test["test_batching_equivalence"]) == 3  # the batch, then each row
    assert len(by_test["test_greedy_generate"]) == 1
    assert all(a["cosine"] >= 0.99 for t in by_test.values() for a in t)
    assert all(a["top1"] is None for a in by_test["test_model_forward"])
    assert all(a["top1"] is not None for a in by_test["test_head_forward"])
    worst = data["summary"]["worst_agreement"]
    result.stdout.fnmatch_lines(
        [f"worst agreement with CPU: cosine {worst['cosine']:.6f}, max-abs-diff *"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("release", ["2025.12", "2026.03", "2026.09"])
def test_all_families_fail_only_for_named_gaps(examples: pytest.Pytester, release: str) -> None:
    report = examples.path / "r.json"
    result = run_spyre(examples, f"--spyre-stack={release}", f"--spyre-report={report}")
    data = read_report(report)
    _check_failures_named(data, release)
    result.stdout.fnmatch_lines([f"*spyre summary: stack {release}*", "gaps hit: *"])
    if release == builtin_catalogue().newest.name:  # the README's main job: all green there
        assert set(data["summary"]["outcomes"]) <= {"passed", "skipped"}, data["summary"]
        skipped = [t for t in data["tests"] if t["outcome"] == "skipped"]
        assert all(t["inference_only"] for t in skipped)
