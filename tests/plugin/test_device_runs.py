"""``--spyre`` runs of small suites on the emulated device: outcomes, the failure report, the
``spyre_xfail``/``no_spyre`` markers, inference-only tests, header and summary, JSON and JUnit,
and ``pytest-xdist``. Each run is a subprocess (real import order, nothing leaks here)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from plugin_runs import Run, pytest_subprocess, read_report, run_spyre

from spyre_adapters import Status, default_registry, prepare, restore, status_at
from spyre_sim.catalogue import builtin_catalogue

SUITE = """
import pytest
import torch

import spyre_adapters


def ones(device):
    return torch.ones(2, 64, dtype=torch.float16, device=device)


class Square(torch.nn.Module):  # model code: judged by the catalogue
    def forward(self, x):
        return x.pow(2).sum()


class Positions(torch.nn.Module):
    def forward(self, x):
        return torch.arange(x.shape[-1], device=x.device)  # cpu-fallback at every release


def test_fallback_op(spyre_device):
    x = Positions()(ones(spyre_device))
    assert x.device.type == "spyre"


def test_pow(spyre_device):
    assert float(Square()(ones(spyre_device)).cpu()) == 128.0


def test_pow_in_harness(spyre_device):
    # the test's own computation on device tensors: host semantics, not judged
    assert float(ones(spyre_device).pow(2).sum().cpu()) == 128.0


@pytest.mark.spyre_xfail(gap="pow")
def test_pow_marked(spyre_device):
    assert float(Square()(ones(spyre_device)).cpu()) == 128.0


@pytest.mark.spyre_xfail(gap="sin-cos", strict=False)
def test_marked_fails_otherwise(spyre_device):
    assert float(ones(spyre_device).sum().cpu()) == 0.0  # fails, but not because of sin-cos


@pytest.mark.spyre_xfail(gap="no-such-gap")
def test_marked_unknown_gap():
    pass


@pytest.mark.no_spyre
def test_on_host(spyre_device):
    assert spyre_device.type == "cpu"
    assert float(Square()(ones(spyre_device))) == 128.0


def test_backward(spyre_device):
    w = ones(spyre_device).requires_grad_(True)
    (w * w).sum().backward()


def test_model_moves(spyre_device, spyre_stack):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    model = LlamaForCausalLM(config).to(spyre_device)
    on_device = [a.name for a in spyre_adapters.applied(model)]
    model.to("cpu")
    assert spyre_adapters.applied(model) == []
    print("APPLIED", spyre_stack.name, sorted(on_device))
"""


def _applied_to_llama(release: str, with_bridges: bool = False) -> list[str]:
    """What ``spyre_adapters.prepare`` applies at ``release`` to the suite's tiny Llama, without
    the op bridges (applied to every model, but named in a run only where they compute a
    call; the suite's Llama reaches none of their ops)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256)  # fmt: skip
    model = LlamaForCausalLM(config)
    prepared = prepare(model, release)
    restore(model)
    registry = default_registry()
    return sorted(
        f"{a.name} {a.version}"
        for a in prepared.applied
        if with_bridges or not registry.get(a.name, a.version).bridges
    )


def _bridging(gap: str) -> list[str]:
    return sorted({m.name for m in default_registry().bridging(gap)})


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("suite")
    (directory / "test_suite.py").write_text(SUITE)
    (directory / "pytest.ini").write_text("[pytest]\nxfail_strict = true\n")
    return directory


@pytest.fixture(scope="module")
def at_2026_02(suite_dir: Path) -> Run:
    """One serial run at 2026.02 (``pow`` open), shared by the tests that read its output."""
    return pytest_subprocess(
        suite_dir, "--spyre", "--spyre-stack", "2026.02", "-rsx", "-s",
        f"--junitxml={suite_dir / 'junit.xml'}", report=suite_dir / "serial.json",
    )  # fmt: skip


def _outcomes(run: Run) -> dict[str, int]:
    return dict(pytest.RunResult(run.ret, run.lines, [], 0.0).parseoutcomes())


def test_pow_gap_open(at_2026_02: Run) -> None:
    """At 2026.02 ``pow`` does not lower: the plain test fails naming the gap, the marked one
    is an expected failure, the backward test is skipped as inference-only."""
    assert builtin_catalogue().release("2026.02").gap_open("pow")
    outcomes = _outcomes(at_2026_02)
    outcomes.pop("warnings", None)
    assert outcomes == {"passed": 4, "failed": 2, "xfailed": 1, "skipped": 1, "errors": 1}
    closes = builtin_catalogue().first_closing("pow", "2026.02")
    bridges = _bridging("pow")
    at_2026_02.fnmatch_lines(
        [
            "spyre: stack 2026.02; adapters: * of * registered apply at this release; lock: none",
            "*- spyre -*",
            "blocked by gap `pow` at stack 2026.02",
            "  op:          aten.pow*",
            "  module path: Square",
            f"  closes in:   {closes}",
            "  bridged by:  no registered adapter matches this model for this gap",
        ]
    )
    assert bridges  # adapters bridge pow, but none matches the test's one-op module
    at_2026_02.fnmatch_lines(["*XFAIL*test_pow_marked*gap `pow` is open at stack 2026.02*"])
    at_2026_02.fnmatch_lines(["*SKIPPED*spyre: inference-only device*"])
    at_2026_02.fnmatch_lines(
        ["spyre_xfail(gap='sin-cos') expected a failure caused by gap `sin-cos`, but the test "
         "failed without hitting it (gaps hit: none): it fails for another reason"]
    )  # fmt: skip
    at_2026_02.fnmatch_lines(["*spyre_xfail(gap='no-such-gap'): unknown gap id; known gaps: *"])


def test_pow_gap_closed(suite_dir: Path) -> None:
    """At 2026.03 ``pow`` lowers: the marked test now fails, telling to remove the marker."""
    assert not builtin_catalogue().release("2026.03").gap_open("pow")
    run = pytest_subprocess(suite_dir, "--spyre", "--spyre-stack", "2026.03")
    outcomes = _outcomes(run)
    outcomes.pop("warnings", None)
    assert outcomes == {"passed": 5, "failed": 2, "skipped": 1, "errors": 1}
    run.fnmatch_lines(
        ["*gap closed: remove this marker: spyre_xfail(gap='pow') but gap `pow` is closed at "
         "stack 2026.03 (first closed in 2026.03); the test passed at this release*"]
    )  # fmt: skip
    run.fnmatch_lines(["gap closed, remove spyre_xfail marker: *test_pow_marked"])
    retired = [
        f"{r.name} {r.version}"
        for r in status_at(default_registry(), "2026.03")
        if r.status is Status.RETIRED
    ]
    if retired:  # pow closes at 2026.03: an adapter bridging only pow is retired there
        run.fnmatch_lines(
            [f"adapters retired at 2026.03 (every gap closed; not applied): *{retired[0]}*",
             "  see `spyre-adapters audit --stack 2026.03`"]
        )  # fmt: skip


def test_summary_lines(at_2026_02: Run) -> None:
    applied = _applied_to_llama("2026.02")
    retired = [
        f"{r.name} {r.version}"
        for r in status_at(default_registry(), "2026.02")
        if r.status is Status.RETIRED
    ]
    expected = [
        "*= spyre summary: stack 2026.02 =*",
        "tests: 9 (8 on the device): passed 4, failed 2, error 1, skipped 1, xfailed 1",
        "failures by class: gap 1, unexplained 2",
        "gaps hit: *pow (2 tests)*",
        "blocked by: pow (2 tests)",
        "fallbacks: *aten.arange.* x1 (1 test)*",
        "miscompiles: *",
        "adapters applied: " + (f"*{applied[0]} (1 test)*" if applied else "none"),
        *([f"adapters retired at 2026.02 (every gap closed; not applied): *{retired[0]}*"]
          if retired else []),
        "harness ops: * (the tests' own work on device tensors, host semantics, not judged)",
        "inference-only: 1 test skipped (backward on the device)",
    ]  # fmt: skip
    pytest.LineMatcher(at_2026_02.summary).fnmatch_lines(expected)
    names = sorted(a.split()[0] for a in _applied_to_llama("2026.02", with_bridges=True))
    assert any(line.endswith(f"APPLIED 2026.02 {names}") for line in at_2026_02.lines)


def test_json_report_and_junit(at_2026_02: Run, suite_dir: Path) -> None:
    at_2026_02.fnmatch_lines([f"JSON report: {suite_dir / 'serial.json'}"])
    data = at_2026_02.report
    assert data is not None
    assert data["schema_version"] == 1
    assert data["stack"] == {"release": "2026.02", "source": "builtin"}
    assert data["settings"] == {
        "numerics": True, "layout_checks": True, "unsupported": "fail", "harness": "host",
        "compare": False,
    }  # fmt: skip
    assert data["adapters"]["registered"] == len(default_registry().manifests())
    tests = {t["nodeid"].split("::")[-1]: t for t in data["tests"]}
    assert [t["nodeid"] for t in data["tests"]] == sorted(t["nodeid"] for t in data["tests"])
    assert {k: t["outcome"] for k, t in tests.items()} == {
        "test_fallback_op": "passed", "test_pow": "failed", "test_pow_marked": "xfailed",
        "test_pow_in_harness": "passed",
        "test_on_host": "passed", "test_backward": "skipped", "test_model_moves": "passed",
        "test_marked_fails_otherwise": "failed", "test_marked_unknown_gap": "error",
    }  # fmt: skip
    blocked = tests["test_pow"]["blocked_by"]
    assert blocked["gap"] == "pow"
    assert blocked["op"].startswith("aten.pow")
    assert blocked["release"] == "2026.02"
    assert blocked["closes_in"] == "2026.03"
    assert blocked["bridged_by"] == []  # no pow adapter matches a one-op module
    assert blocked["module_path"] == "Square"
    assert tests["test_pow"]["failure"]["class"] == "gap"
    assert tests["test_pow_in_harness"]["harness_ops"] >= 2
    assert tests["test_pow_in_harness"]["gaps"].get("pow") is None
    assert tests["test_pow_marked"]["xfail_gap"] == "pow"
    assert tests["test_on_host"]["on_device"] is False
    assert tests["test_backward"]["inference_only"] is True
    assert tests["test_fallback_op"]["fallbacks"]
    assert sorted(tests["test_model_moves"]["adapters"]) == _applied_to_llama("2026.02")
    assert data["summary"]["blocked"] == {"pow": 2}  # the failed test and the xfailed one
    assert data["summary"]["outcomes"] == {
        "error": 1, "failed": 2, "passed": 4, "skipped": 1, "xfailed": 1,
    }  # fmt: skip

    cases = {c.get("name"): c for c in ET.parse(suite_dir / "junit.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_pow"].iter("property")}
    assert props["spyre_gaps"] == "pow"
    assert "gap `pow` (aten.pow" in (props["spyre_blocked_by"] or "")
    props = {p.get("name"): p.get("value") for p in cases["test_on_host"].iter("property")}
    assert props["spyre_on_device"] == "false"


def test_xdist_equals_serial(at_2026_02: Run, suite_dir: Path) -> None:
    dist = pytest_subprocess(
        suite_dir, "--spyre", "--spyre-stack", "2026.02", "-n", "2", "-s",
        report=suite_dir / "dist.json",
    )  # fmt: skip
    assert dist.report is not None
    assert dist.report == at_2026_02.report

    def strip(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith("JSON report")]

    assert strip(dist.summary) == strip(at_2026_02.summary)


def test_fixtures_and_header_under_spyre(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import torch

        def test_device(spyre_device, spyre_stack):
            assert spyre_device == torch.device("spyre")
            assert spyre_stack.name == "2026.05"
            assert torch.nn.Module.to.__wrapped__ is not None  # the placement hook is on

        @pytest.mark.no_spyre
        def test_host(spyre_device):
            assert spyre_device == torch.device("cpu")
        """
    )
    result = run_spyre(pytester, "--spyre-stack=2026.05", "--spyre-numerics=off")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["spyre: numerics off, layout checks on, unsupported ops: fail, harness ops: host*"]
    )


def test_unknown_stack_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run_spyre(pytester, "--spyre-stack", "2031.01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    names = [r.name for r in builtin_catalogue().releases]
    result.stderr.fnmatch_lines([f"*--spyre-stack: '2031.01'*{names[0]}*"])


def test_user_release_file(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile("def test_x(spyre_stack):\n    print('STACK', spyre_stack.name)\n")
    newest = builtin_catalogue().newest
    release = pytester.path / "next.toml"
    release.write_text(
        f'schema_version = 1\n[release]\nname = "2099.01"\nbase = "{newest.name}"\n'
        'date = 2099-01-01\nsummary = "what if"\n'
    )
    result = run_spyre(pytester, f"--spyre-stack={release}", "-s")
    if result.ret == pytest.ExitCode.USAGE_ERROR:  # the release file format is spyre_sim's
        pytest.fail(result.stderr.str())
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["spyre: stack 2099.01 from *next.toml;*", "*STACK 2099.01"])


def test_lock_file(pytester: pytest.Pytester) -> None:
    """Under --spyre-lock the pinned set is applied; a release the lock does not pin is a
    usage error naming the lock."""
    from spyre_adapters import pin, write_lock

    lock = pytester.path / "spyre-adapters.lock"
    write_lock(pin(default_registry(), "2026.05"), lock)
    pytester.makepyfile(
        """
        import spyre_adapters
        from transformers import LlamaConfig, LlamaForCausalLM

        def test_pinned(spyre_device):
            config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
            model = LlamaForCausalLM(config).to(spyre_device)
            print("LOCKED", sorted(a.name for a in spyre_adapters.applied(model)))
        """
    )
    result = run_spyre(pytester, "--spyre-stack=2026.05", f"--spyre-lock={lock}", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"spyre: stack 2026.05; adapters: * lock: {lock}"])
    names = sorted(a.split()[0] for a in _applied_to_llama("2026.05", with_bridges=True))
    assert any(line.endswith(f"LOCKED {names}") for line in result.outlines)
    refused = run_spyre(pytester, "--spyre-stack=2026.09", f"--spyre-lock={lock}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*--spyre: lock '{lock}' cannot be used at stack 2026.09*"])


def test_everything_undone_after_an_in_process_run(pytester: pytest.Pytester) -> None:
    """Patches, environment, stack and settings are back as they were once the run ends."""
    import os

    import torch

    import spyre_sim

    def state() -> tuple[object, ...]:
        return (
            torch.nn.Module.to, torch.nn.Module.cpu, torch.autograd.backward,
            torch.autograd.grad, os.environ.get("TRANSFORMERS_TEST_DEVICE"),
            os.environ.get("TRANSFORMERS_TEST_BACKEND"), spyre_sim.current_stack().name,
            spyre_sim.settings.numerics, spyre_sim.settings.layout_checks,
        )  # fmt: skip

    before = state()
    pytester.makepyfile(
        """
        import torch

        def test_inside(spyre_device, spyre_stack):
            assert spyre_device.type == "spyre"
            assert spyre_stack.name == "2026.03"
            assert hasattr(torch.nn.Module.to, "__wrapped__")
            assert hasattr(torch.autograd.backward, "__wrapped__")
        """
    )
    result = pytester.runpytest_inprocess(
        "--spyre", "--spyre-stack=2026.03", "--spyre-numerics=off", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    assert state() == before


def test_unsupported_fallback_policy(pytester: pytest.Pytester) -> None:
    """With --spyre-unsupported=fallback an op the release cannot lower runs on the host and is
    recorded as a fallback of its gap; layout rules still apply."""
    pytester.makepyfile(
        """
        import torch

        class Square(torch.nn.Module):
            def forward(self, x):
                return x.pow(2).sum()

        def test_pow_on_host(spyre_device):
            x = torch.ones(2, 64, dtype=torch.float16, device=spyre_device)
            assert float(Square()(x).cpu()) == 128.0
        """
    )
    report = pytester.path / "r.json"
    result = run_spyre(
        pytester,
        "--spyre-stack=2026.02",
        "--spyre-unsupported=fallback",
        f"--spyre-report={report}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["spyre: numerics on, layout checks on, unsupported ops: fallback, harness ops: host*"]
    )
    (test,) = read_report(report)["tests"]
    assert test["fallbacks"] == {"aten.pow.Tensor_Scalar": 1}
    assert test["gaps"]["pow"] == 1
    assert test["blocked_by"] is None
