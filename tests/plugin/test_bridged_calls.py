"""Op bridges in the per-test record: applied to every model, named only where they computed."""

from __future__ import annotations

from pathlib import Path

from plugin_runs import pytest_subprocess

SUITE = '''
import torch
from torch import nn


class Clamp(nn.Module):
    """T5's overflow guard: isinf inside the model."""

    def forward(self, x):
        return torch.where(torch.isinf(x), torch.zeros_like(x), x) + 1


class Plain(nn.Module):
    def forward(self, x):
        return x + 1


def test_reaches_isinf():
    model = Clamp().to("spyre")
    out = model(torch.ones(2, 64).to("spyre"))
    assert float(out.cpu().sum()) == 256.0


def test_does_not():
    model = Plain().to("spyre")
    out = model(torch.ones(2, 64).to("spyre"))
    assert float(out.cpu().sum()) == 256.0
'''


def test_a_bridge_is_named_on_the_tests_where_it_computed_a_call(tmp_path: Path) -> None:
    (tmp_path / "test_models.py").write_text(SUITE, encoding="utf-8")
    run = pytest_subprocess(
        tmp_path, "--spyre", "--spyre-stack=2026.09", report=tmp_path / "r.json"
    )
    assert run.ret == 0, "\n".join(run.lines)
    assert run.report is not None
    tests = {t["nodeid"].rsplit("::", 1)[1]: t for t in run.report["tests"]}
    reaches, plain = tests["test_reaches_isinf"], tests["test_does_not"]
    assert reaches["bridged"] == {"aten.isinf.default": 1}
    # the second form (2.x, refusal handlers) is resolved where it and 1.x both admit 2026.09
    assert [a for a in reaches["adapters"] if a.startswith("bridge-")] == ["bridge-isinf 2.1.0"]
    assert plain["bridged"] == {}
    assert not [a for a in plain["adapters"] if a.startswith("bridge-")]
