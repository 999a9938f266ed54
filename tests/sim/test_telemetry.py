"""Telemetry: plain data, mergeable across processes, diffable, recordable."""

from __future__ import annotations

import json
from types import ModuleType

import pytest
import torch

from spyre_sim import telemetry

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def test_snapshot_is_json_and_counts_transfers(spyre: ModuleType) -> None:
    x = torch.ones(4, 64, dtype=torch.float16).to("spyre")
    x.cpu()
    snap = telemetry.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert snap["schema_version"] == 1
    assert snap["transfers"]["host_to_device"] == 1
    assert snap["transfers"]["host_to_device_bytes"] == 4 * 64 * 2
    assert snap["transfers"]["device_to_host_bytes"] == 4 * 64 * 2


def test_merge_adds_counts_and_unions_modules() -> None:
    telemetry.reset()
    telemetry.count_op("aten.sin.default", "cpu-fallback")
    telemetry.count_gap("sin-cos", "model.rotary_emb")
    a = telemetry.snapshot()
    telemetry.reset()
    telemetry.count_op("aten.sin.default", "cpu-fallback")
    telemetry.count_op("aten.mm.default", "native")
    telemetry.count_gap("sin-cos", "model.layers.0.rotary")
    telemetry.count_transfer(True, 10)
    b = telemetry.snapshot()
    telemetry.reset()
    merged = telemetry.merge(a, b)
    assert merged["ops"]["aten.sin.default"] == {"cpu-fallback": 2}
    assert merged["ops"]["aten.mm.default"] == {"native": 1}
    assert merged["gaps"]["sin-cos"]["count"] == 2
    assert merged["gaps"]["sin-cos"]["modules"] == ["model.layers.0.rotary", "model.rotary_emb"]
    assert merged["transfers"]["host_to_device_bytes"] == 10
    with pytest.raises(ValueError, match="schema_version"):
        telemetry.merge({**a, "schema_version": 99})


def test_diff_and_record(spyre: ModuleType) -> None:
    x = torch.ones(2, 64, dtype=torch.float16).to("spyre")
    _ = x + x
    before = telemetry.snapshot()
    with telemetry.record() as rec:
        _ = x * x
        _ = x + x
    after = telemetry.snapshot()
    assert rec.snapshot["ops"] == {
        "aten.add.Tensor": {"native": 1},
        "aten.mul.Tensor": {"native": 1},
    }
    assert telemetry.diff(after, before)["ops"] == rec.snapshot["ops"]
    assert after["ops"]["aten.add.Tensor"] == {"native": 2}
