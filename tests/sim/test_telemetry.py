"""Telemetry: typed frozen snapshots, JSON at the edges, mergeable, diffable, recordable."""

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
    typed = telemetry.snapshot()
    assert typed.transfers.host_to_device == 1
    snap = typed.to_json()
    assert json.loads(json.dumps(snap)) == snap
    assert telemetry.Snapshot.from_json(snap) == typed
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
    typed = telemetry.merge(a, b)
    assert typed.ops["aten.sin.default"] == {telemetry.OpDecision.FALLBACK: 2}
    assert typed.gaps["sin-cos"].modules == ("model.layers.0.rotary", "model.rotary_emb")
    merged = typed.to_json()
    assert merged["ops"]["aten.sin.default"] == {"cpu-fallback": 2}
    assert merged["ops"]["aten.mm.default"] == {"native": 1}
    assert merged["gaps"]["sin-cos"]["count"] == 2
    assert merged["gaps"]["sin-cos"]["modules"] == ["model.layers.0.rotary", "model.rotary_emb"]
    assert merged["transfers"]["host_to_device_bytes"] == 10
    with pytest.raises(ValueError, match="schema_version"):
        telemetry.Snapshot.from_json({**a.to_json(), "schema_version": 99})


def test_diff_and_record(spyre: ModuleType) -> None:
    x = torch.ones(2, 64, dtype=torch.float16).to("spyre")
    _ = x + x
    before = telemetry.snapshot()
    with telemetry.record() as rec:
        _ = x * x
        _ = x + x
    after = telemetry.snapshot()
    assert rec.snapshot.to_json()["ops"] == {
        "aten.add.Tensor": {"native": 1},
        "aten.mul.Tensor": {"native": 1},
    }
    assert telemetry.diff(after, before).ops == rec.snapshot.ops
    assert after.to_json()["ops"]["aten.add.Tensor"] == {"native": 2}


def test_json_follows_the_schema_defined_in_code(spyre: ModuleType) -> None:
    x = torch.ones(2, 64, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.05"):
        _ = torch.cumsum(x, dim=-1)  # a fallback: ops, fallbacks, gaps, transfers
    doc = telemetry.snapshot().to_json()
    schema = telemetry.JSON_SCHEMA
    assert sorted(doc) == sorted(schema["required"]) == sorted(schema["properties"])
    decisions = set(schema["properties"]["ops"]["additionalProperties"]["propertyNames"]["enum"])
    assert {d for by in doc["ops"].values() for d in by} <= decisions
    assert sorted(doc["transfers"]) == sorted(schema["properties"]["transfers"]["required"])
    entry = schema["properties"]["gaps"]["additionalProperties"]
    for gap in doc["gaps"].values():
        assert set(entry["required"]) <= set(gap) <= set(entry["properties"])


def test_a_document_without_module_counts_counts_each_module_once() -> None:
    doc = {"gaps": {"sin-cos": {"count": 3, "modules": ["a", "b"]}}}
    snap = telemetry.Snapshot.from_json(doc)
    assert snap.gaps["sin-cos"] == telemetry.GapCount(3, {"a": 1, "b": 1})
    assert snap.gaps["sin-cos"].modules == ("a", "b")


def test_every_counter_is_named_once_for_the_snapshot_and_the_device_state() -> None:
    # Snapshot's readers and writers loop over these names: a counter missing from them would
    # be left out of the JSON document, merge and diff without an error.
    from dataclasses import fields

    from spyre_sim.state import FLAT_COUNTS, MODULE_COUNTS, Counters

    named = {"ops", "transfers", *FLAT_COUNTS, *MODULE_COUNTS}
    assert {f.name for f in fields(telemetry.Snapshot)} == named
    assert set(Counters.__slots__) == named
    assert set(telemetry.JSON_SCHEMA["required"]) == named | {"schema_version"}
