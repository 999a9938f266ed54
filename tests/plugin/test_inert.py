"""Without --spyre the plugin registers its markers and does nothing else."""

from __future__ import annotations

import pytest

CHECK_MODULES = """
import sys

import pytest


@pytest.mark.spyre_xfail(gap="sin-cos")
@pytest.mark.no_spyre
def test_nothing_heavy_was_imported():
    heavy = [name for name in ("torch", "transformers", "spyre_sim", "spyre_adapters",
                               "pytest_spyre.run", "pytest_spyre.placement")
             if name in sys.modules]
    assert heavy == []
    assert "pytest_spyre.plugin" in sys.modules
"""


def test_inert_without_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inert=CHECK_MODULES)
    result = pytester.runpytest_subprocess("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.outlines if not line.startswith(("plugins:", "running:"))]
    assert [line for line in lines if "spyre" in line] == []
    assert result.stderr.str() == ""


def test_markers_registered_without_flag(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.spyre_xfail(gap, strict=None):*", "@pytest.mark.no_spyre:*"]
    )


def test_fixtures_without_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_device(spyre_device):
            assert str(spyre_device) == "cpu"

        def test_stack(spyre_stack):
            raise AssertionError("not reached: skipped without --spyre")
        """
    )
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*spyre_stack needs --spyre*"])
