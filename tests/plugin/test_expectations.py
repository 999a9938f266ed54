"""``--spyre-expectations FILE``: expected outcomes per test and release; CI fails on an
unexpected failure and on an unexpected pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_runs import pytest_subprocess

from pytest_spyre.expectations import entries_from_report, load

SUITE = """
import torch


class Square(torch.nn.Module):
    def forward(self, x):
        return x.pow(2).sum()


def ones(device):
    return torch.ones(2, 64, dtype=torch.float16, device=device)


def test_gap(spyre_device):
    assert float(Square()(ones(spyre_device)).cpu()) == 128.0   # pow: a gap at 2026.02


def test_passes(spyre_device):
    assert float(ones(spyre_device).sum().cpu()) == 128.0


def test_network():
    raise OSError("needs the hub")
"""

FILE = """
schema_version = 1
default = "pass"

[[expect]]
tests = ["*::test_gap"]
mode = "xfail-strict"
class = "gap"
gap = "pow"
stacks = "<2026.03"
reason = "pow does not lower before 2026.03"

[[expect]]
tests = ["*::test_network"]
mode = "skip"
reason = "needs the Hugging Face Hub"
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "expect.toml").write_text(FILE)
    return tmp_path


def test_expected_outcomes_pass_the_run(suite: Path) -> None:
    run = pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.02",
                            f"--spyre-expectations={suite / 'expect.toml'}", "-rxs",
                            report=suite / "r.json")  # fmt: skip
    assert run.ret == 0, "\n".join(run.lines)
    run.fnmatch_lines(["*XFAIL*test_gap*spyre expected gap failure: pow does not lower*",
                       "*SKIPPED*spyre expectations: needs the Hugging Face Hub*"])  # fmt: skip
    assert run.report is not None
    verdicts = {t["nodeid"].split("::")[-1]: t["expectation"] for t in run.report["tests"]}
    assert verdicts == {"test_gap": "failed as expected", "test_passes": "passed as expected",
                        "test_network": "skipped as expected"}  # fmt: skip


def test_an_unexpected_pass_fails_the_run(suite: Path) -> None:
    """At 2026.03 pow lowers: the entry no longer holds there (its stacks range), so the test
    must pass, and it does; pin the entry to every release and the pass is unexpected."""
    assert pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.03",
                             f"--spyre-expectations={suite / 'expect.toml'}").ret == 0  # fmt: skip
    every = suite / "every.toml"
    every.write_text(FILE.replace('stacks = "<2026.03"\n', ""))
    run = pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.03",
                            f"--spyre-expectations={every}")  # fmt: skip
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    run.fnmatch_lines(
        ["*[[]unexpected pass[]]*expected to fail with class gap*update the expectations file*"]
    )


def test_an_unexpected_failure_fails_the_run(suite: Path) -> None:
    wrong = suite / "wrong.toml"
    wrong.write_text(FILE.replace('class = "gap"\ngap = "pow"', 'class = "precision"'))
    run = pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.02",
                            f"--spyre-expectations={wrong}")  # fmt: skip
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    run.fnmatch_lines(["*unexpected failure (expectations *, entry expect[[]0[]]): expected to fail "
                       "with class precision, got gap: aten.pow*"])  # fmt: skip


def test_every_problem_of_the_file_is_reported_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'schema_version = 2\nextra = 1\n[[expect]]\ntests = []\nmode = "maybe"\n'
        '[[expect]]\ntests = ["a"]\nmode = "xfail"\nstacks = "~~"\nnumerics = "yes"\n'
    )
    with pytest.raises(pytest.UsageError) as info:
        load(bad)
    text = str(info.value)
    for expected in ("schema_version: must be 1", "extra: unknown key", "expect[0].tests",
                     "expect[0].mode", "expect[0].reason", "expect[1].class",
                     "expect[1].stacks", "expect[1].numerics"):  # fmt: skip
        assert expected in text, expected
    assert str(bad) in text


def test_entries_from_a_report_are_a_starting_point() -> None:
    report = {"tests": [
        {"nodeid": "t.py::a", "outcome": "failed",
         "failure": {"class": "gap", "detail": "pow ...", "gap": "pow"}},
        {"nodeid": "t.py::b", "outcome": "failed", "failure": {"class": "unexplained", "detail": "x"}},
        {"nodeid": "t.py::c", "outcome": "passed", "failure": None},
    ]}  # fmt: skip
    entries = entries_from_report(report, "2026.05", numerics=True)
    assert [e["tests"] for e in entries] == [["t.py::a"], ["t.py::b"]]
    assert entries[0]["mode"] == "xfail-strict"
    assert entries[0]["gap"] == "pow"
    assert entries[1]["mode"] == "skip"


def test_subtest_failures_count_as_pytest_counts_them(tmp_path: Path) -> None:
    (tmp_path / "test_sub.py").write_text(
        "import unittest\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_subs(self):\n"
        "        for i in range(3):\n"
        "            with self.subTest(i=i):\n"
        "                self.assertLess(i, 1)\n"
    )
    run = pytest_subprocess(tmp_path, "--spyre", report=tmp_path / "r.json")
    assert run.report is not None
    (test,) = run.report["tests"]
    assert (test["outcome"], test["subtests_failed"]) == ("failed", 2)
    assert run.report["summary"]["outcomes"] == {"failed": 1, "subtests failed": 2}
