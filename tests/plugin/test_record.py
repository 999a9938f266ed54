"""Per-test records, their tally, JUnit properties, and the CPU-agreement measure."""

from __future__ import annotations

import copy
import json
import math
import warnings
from typing import Any

import pytest

from pytest_spyre.record import Agreement, Blocker, TestRecord, tally


def _records() -> list[TestRecord]:
    blocked = Blocker("pow", "aten.pow.Tensor_Scalar", "2026.02", "model.norm", "2026.03",
                      False, "aten.pow ... not lowered", ["rms-norm 1.0.0"])  # fmt: skip
    return [
        TestRecord("t.py::b", outcome="failed", gaps={"pow": 1}, blocked_by=blocked,
                   adapters=["rope-rotation 1.0.0"]),
        TestRecord("t.py::a", gaps={"sin-cos": 3}, gap_modules={"sin-cos": ["model.rotary"]},
                   fallbacks={"aten.arange.default": 2}, miscompiles={"rotate-half": 1},
                   adapters=["rope-rotation 1.0.0"],
                   compare=[Agreement("M", 0.99, 0.5, 1.0), Agreement("M", 0.999, 0.1, 1.0)]),
        TestRecord("t.py::c", outcome="skipped", on_device=False,
                   fallbacks={"aten.arange.default": 1}, inference_only=True),
    ]  # fmt: skip


def test_json_round_trip() -> None:
    for record in _records():
        data = json.loads(json.dumps(record.to_json()))
        assert TestRecord.from_json(data) == record


def test_tally_counts_tests_per_gap_and_is_order_independent() -> None:
    records = _records()
    total = tally(records)
    assert tally(list(reversed(records))).to_json() == total.to_json()
    assert total.tests == 3
    assert total.on_device == 2
    assert total.gaps_hit == {"pow": 1, "sin-cos": 1, "rotate-half": 1}
    assert total.blocked == {"pow": 1}
    assert total.fallbacks == {"aten.arange.default": 3}
    assert total.fallback_tests == {"aten.arange.default": 2}
    assert total.adapters == {"rope-rotation 1.0.0": 2}
    assert total.inference_only == 1
    assert total.worst is not None
    assert total.worst[0] == "t.py::a"
    assert total.worst[1].cosine == pytest.approx(0.99)


def test_junit_properties_carry_the_record() -> None:
    props = dict(_records()[0].properties())
    assert props["spyre_gaps"] == "pow"
    assert props["spyre_adapters"] == "rope-rotation 1.0.0"
    assert props["spyre_blocked_by"] == (
        "gap `pow` (aten.pow.Tensor_Scalar in model.norm) at stack 2026.02, closed in 2026.03; "
        "bridged by adapter rms-norm 1.0.0"
    )
    assert dict(_records()[1].properties())["spyre_agreement"].startswith("cosine=0.990000")


def test_agreement_measures() -> None:
    torch = pytest.importorskip("torch")
    from pytest_spyre.compare import agreement

    ref = torch.tensor([[[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]])
    same = agreement("M", ref.clone(), ref, logits=True)
    assert same.cosine == pytest.approx(1.0)
    assert (same.max_abs_diff, same.top1) == (0.0, 1.0)
    flipped = ref.clone()
    flipped[0, 1] = torch.tensor([1.0, 2.0, 3.5])
    worse = agreement("M", flipped, ref, logits=True)
    assert worse.top1 == 0.5
    assert worse.max_abs_diff == pytest.approx(2.5)
    assert worse.cosine < 1.0
    broken = agreement("M", torch.full_like(ref, math.nan), ref, logits=False)
    assert (broken.cosine, broken.max_abs_diff, broken.top1) == (-1.0, math.inf, None)


@pytest.mark.parametrize("load_after_move", [False, True])
def test_the_cpu_reference_follows_weights_loaded_after_the_move(
    spyre: Any, load_after_move: bool
) -> None:
    """``--spyre-compare`` against the weights the device model holds, not those it was moved
    with: a checkpoint loaded after ``.to("spyre")`` reaches the CPU copy too."""
    import torch

    from pytest_spyre.compare import CpuReference

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64))
    other = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.normal_(0.0, 0.5)
    measured: list[Any] = []
    reference = CpuReference(model, measured.append)
    with warnings.catch_warnings():  # its fp32 weights, stored as fp16 (warned once)
        warnings.simplefilter("ignore", spyre.SpyreDowncastWarning)
        model.to("spyre")
    inputs = torch.randn(4, 64).to("spyre")
    with torch.no_grad():
        model(inputs)
        if load_after_move:
            model.load_state_dict(other.state_dict())
        model(inputs)
    reference.remove()
    assert len(measured) == 2
    assert min(m.cosine for m in measured) > 0.999
