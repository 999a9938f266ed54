"""``HBM_POOL_PLANNING=0``, torch-spyre's switch for its HBM pool planning (the upstream
workaround of the 2026.08 ``mem-pool`` regression, #3980), reaches a ``--spyre`` run from the
environment, and the summary says that it is in effect."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_runs import pytest_subprocess

SUITE = """
import torch


class Append(torch.nn.Module):
    def forward(self, cache, new):
        return torch.cat((cache, new), dim=-2)  # a KV-cache append


def test_cache_append(spyre_device):
    cache = torch.ones(1, 2, 3, 64, dtype=torch.float16)
    new = torch.full((1, 2, 1, 64), 2.0, dtype=torch.float16)
    got = Append()(cache.to(spyre_device), new.to(spyre_device)).cpu()
    assert torch.equal(got, torch.cat((cache, new), dim=-2))
"""


@pytest.mark.parametrize("planning", ["1", "0"])
def test_the_pool_switch_reaches_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planning: str
) -> None:
    (tmp_path / "test_append.py").write_text(SUITE)
    monkeypatch.setenv("HBM_POOL_PLANNING", planning)
    run = pytest_subprocess(
        tmp_path, "--spyre", "--spyre-stack=2026.08", report=tmp_path / "r.json"
    )
    assert run.report is not None
    (test,) = run.report["tests"]
    if planning == "1":
        assert test["outcome"] == "failed"
        assert test["miscompiles"] == {"mem-pool": 1}
        assert not any("HBM_POOL_PLANNING" in line for line in run.lines)
    else:
        assert test["outcome"] == "passed", "\n".join(run.lines)
        assert test["miscompiles"] == {}
        pytest.LineMatcher(run.lines).fnmatch_lines(
            ["miscompiles: none (HBM_POOL_PLANNING=0: the stack's pool planning is off, *"]
        )
