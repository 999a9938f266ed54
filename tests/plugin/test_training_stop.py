"""A training step stopped by the device is an inference-only skip, decided before pytest
builds the report: the failure's traceback (through a model's frames, about a second per
test) is never rendered. Plain and ``unittest`` tests alike; an inference forward stopped by
the same gap still fails with its traceback and ``spyre`` section."""

from __future__ import annotations

import pytest
from plugin_runs import run_spyre

SUITE = """
import unittest

import torch


class Drop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


def step(device, training):
    model = Drop().to(device).train(training)
    with torch.set_grad_enabled(training):
        return model(torch.ones(2, 64, device=device))


def test_plain_training(spyre_device):
    step(spyre_device, True)


class TrainingCase(unittest.TestCase):
    def test_unittest_training(self):
        step("spyre", True)


def test_inference_gap(spyre_device):
    model = Drop().to(spyre_device)  # training mode, gradients off: inference, judged
    with torch.no_grad():
        model(torch.ones(2, 64, device=spyre_device))
"""

CONFTEST = """
import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call" and call.excinfo is not None:
        error = call.excinfo.value
        cause = type(error.__cause__).__name__ if error.__cause__ is not None else "-"
        with open("seen.txt", "a", encoding="utf-8") as seen:
            seen.write(f"{item.name} {type(error).__name__} {cause} {report.outcome}\\n")
    return report
"""


def test_training_stop_is_a_skip_before_the_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest(CONFTEST)
    result = run_spyre(pytester, "-rs", "--spyre-stack", "2026.09")
    result.assert_outcomes(passed=0, failed=1, skipped=2)
    seen = {
        line.split()[0]: line.split()[1:]
        for line in (pytester.path / "seen.txt").read_text(encoding="utf-8").splitlines()
    }
    # the report was built from a skip, whose cause is the device's error
    assert seen["test_plain_training"] == ["InferenceOnlySkip", "SpyreLoweringError", "skipped"]
    assert seen["test_unittest_training"] == ["InferenceOnlySkip", "SpyreLoweringError", "skipped"]
    # not a training step (gradients off): the gap is a failure, with its traceback
    assert seen["test_inference_gap"] == ["SpyreLoweringError", "-", "failed"]
    result.stdout.fnmatch_lines(
        ["SKIPPED *test_suite.py:*: spyre: inference-only device: *(a training step*"]
    )
    result.stdout.fnmatch_lines(["*blocked by gap `unlowered-op` at stack 2026.09*"])
    result.stdout.fnmatch_lines(["*in forward*", "*return self.drop(self.lin(x))*"])
