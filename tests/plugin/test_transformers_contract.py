"""The Transformers test-device contract: a suite whose root conftest imports
``transformers.testing_utils`` gets ``torch_device == "spyre"`` under ``--spyre`` (and "cpu"
without), because the plugin registers the device before that first import."""

from __future__ import annotations

import pytest
from plugin_runs import run_spyre

CONFTEST = """
import os

from transformers.testing_utils import torch_device

SEEN_AT_CONFTEST_IMPORT = (torch_device, os.environ.get("TRANSFORMERS_TEST_DEVICE"))
"""

SUITE = """
import os

import pytest
import torch
from transformers.testing_utils import (
    backend_device_count, backend_empty_cache, backend_manual_seed, torch_device,
)

import conftest


def test_device_contract():
    print("CONFTEST SAW", conftest.SEEN_AT_CONFTEST_IMPORT)
    print("TEST SEES", torch_device)
    if torch_device == "spyre":
        assert torch.ones(2, 64, dtype=torch.float16, device=torch_device).device.type == "spyre"
        assert os.environ["TRANSFORMERS_TEST_BACKEND"] == "spyre_sim"
    backend_manual_seed(torch_device, 0)
    backend_empty_cache(torch_device)
    print("DEVICE COUNT", backend_device_count(torch_device))


@pytest.mark.no_spyre
def test_no_spyre_rebinds_torch_device():
    import transformers.testing_utils as tu

    assert torch_device == "cpu"
    assert tu.torch_device == "cpu"
    assert torch.ones(2, device=torch_device).device.type == "cpu"


def test_torch_device_back_after_no_spyre():
    import transformers.testing_utils as tu

    print("AFTER", torch_device, tu.torch_device)
"""


@pytest.fixture
def transformers_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_contract=SUITE)
    return pytester


def test_torch_device_is_spyre_under_flag(
    transformers_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRANSFORMERS_TEST_DEVICE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_TEST_BACKEND", raising=False)
    result = run_spyre(transformers_suite, "-s")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*CONFTEST SAW ('spyre', 'spyre')",
            "TEST SEES spyre",
            "DEVICE COUNT 1",
            "*AFTER spyre spyre",
        ]
    )


def test_torch_device_is_cpu_without_flag(
    transformers_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRANSFORMERS_TEST_DEVICE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_TEST_BACKEND", raising=False)
    result = transformers_suite.runpytest_subprocess("-s", "-k", "device_contract")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*CONFTEST SAW ('cpu', None)", "TEST SEES cpu"])


def test_device_spec_variable_is_refused(
    transformers_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMERS_TEST_DEVICE_SPEC", "spec.py")
    result = run_spyre(transformers_suite)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*TRANSFORMERS_TEST_DEVICE_SPEC='spec.py' is set*unset it*"])
