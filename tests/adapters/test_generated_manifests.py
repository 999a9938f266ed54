"""Generated op bridges in the manifest schema and the lifecycle: `generated`, the [bridges]
evidence tables, and retirement as soon as a release lowers the bridged op."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from spyre_adapters import Lifecycle, Registry, Status
from spyre_adapters.manifest import Manifest, parse_manifest
from spyre_adapters.stacks import default_catalogue

GOOD: dict[str, Any] = {
    "schema_version": 1,
    "name": "bridge-histc",
    "version": "1.0.0",
    "kind": "scaffolding",
    "generated": True,
    "summary": "Generated op bridge: aten.histc.default",
    "gaps": ["unlowered-op"],
    "families": ["olmoe"],
    "stacks": ">=2026.05",
    "entry_point": "spyre_adapters.library.op_bridge:OpBridge",
    "bridges": {
        "aten.histc.default": {
            "candidate": "rewrite",
            "gap": "unlowered-op",
            "releases": ["2026.05", "2026.09"],
            "checked": ["int32[16], 4, 0, 3 (captured in olmoe)"],
        }
    },
}


def parse(data: dict[str, Any]) -> tuple[Manifest | None, dict[str, list[str]]]:
    manifest, problems = parse_manifest(
        data, where="m.toml", catalogue=default_catalogue(), check_entry_point=False
    )
    table: dict[str, list[str]] = {}
    for problem in problems:
        table.setdefault(problem.key, []).append(problem.message)
    return manifest, table


def test_a_generated_manifest_reads_into_bridges() -> None:
    manifest, problems = parse(GOOD)
    assert problems == {}
    assert manifest is not None
    assert manifest.generated
    (bridge,) = manifest.bridges
    assert (bridge.op, bridge.candidate, bridge.gap) == (
        "aten.histc.default",
        "rewrite",
        "unlowered-op",
    )
    assert bridge.releases == ("2026.05", "2026.09")


def test_hand_written_manifests_are_not_generated() -> None:
    data = {k: v for k, v in GOOD.items() if k not in ("generated", "bridges")}
    manifest, problems = parse(data)
    assert problems == {}
    assert manifest is not None
    assert not manifest.generated
    assert manifest.bridges == ()


def test_every_problem_of_the_bridges_is_reported_with_its_key() -> None:
    data = copy.deepcopy(GOOD)
    data["generated"] = "yes"
    data["bridges"]["aten.histc.default"] = {
        "candidate": "magic",
        "gap": "sort",
        "releases": ["2026.03", "2031.01"],
        "checked": [],
        "colour": "blue",
    }
    data["bridges"]["not an op"] = {}
    _, problems = parse(data)
    assert "expected true or false" in problems["generated"][0]
    assert "not a bridge candidate" in problems["bridges.aten.histc.default.candidate"][0]
    assert "not one of the adapter's gaps" in problems["bridges.aten.histc.default.gap"][0]
    releases = problems["bridges.aten.histc.default.releases"]
    assert any("outside the adapter's stacks '>=2026.05'" in m for m in releases)
    assert any("'2031.01' is not a release" in m for m in releases)
    assert "must list the inputs" in problems["bridges.aten.histc.default.checked"][0]
    assert "unknown key" in problems["bridges.aten.histc.default.colour"][0]
    assert "not an ATen overload name" in problems["bridges.not an op"][0]


def test_a_generated_manifest_must_carry_its_evidence() -> None:
    data = {k: v for k, v in GOOD.items() if k != "bridges"}
    _, problems = parse(data)
    assert "must carry its evidence" in problems["bridges"][0]


def test_a_gap_no_bridged_op_stops_models_at_is_refused() -> None:
    data = copy.deepcopy(GOOD)
    data["gaps"] = ["unlowered-op", "sort"]
    _, problems = parse(data)
    assert "'sort' is bridged by none of the adapter's [bridges] ops" in problems["gaps"][0]


def test_the_implementation_table_must_be_the_manifest_table() -> None:
    data = copy.deepcopy(GOOD)
    data["entry_point"] = "spyre_fake_adapters:histc_rewrite"
    data["bridges"]["aten.histc.default"]["candidate"] = "host"
    manifest, problems = parse_manifest(
        data, where="m.toml", catalogue=default_catalogue(), check_entry_point=True
    )
    assert manifest is None
    assert any("differ from the manifest's [bridges]" in p.message for p in problems)


def registry_with(manifest: Manifest) -> Registry:
    registry = Registry(default_catalogue())
    registry.add(manifest, source="test")
    return registry


def lowers_histc(tmp_path: Path) -> Path:
    path = tmp_path / "2026.11.toml"
    path.write_text(
        'schema_version = 1\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        'date = 2026-11-20\nsummary = "2026.09 + histc on the device"\n'
        '[ops]\n"aten.histc" = { decision = "native", note = "a histogram kernel lands" }\n',
        encoding="utf-8",
    )
    return path


def test_a_bridge_retires_when_a_release_lowers_its_op(tmp_path: Path) -> None:
    manifest, _ = parse(GOOD)
    assert manifest is not None
    lifecycle = Lifecycle(registry_with(manifest))
    (row,) = lifecycle.status_at("2026.09")
    assert row.status is Status.ACTIVE
    assert row.open_gaps == ("unlowered-op",)
    # the catch-all gap stays open at the new release, but the bridged op lowers there
    release = lifecycle.release(str(lowers_histc(tmp_path)))
    assert release.gap_open("unlowered-op")
    (row,) = lifecycle.status_at(release)
    assert row.status is Status.RETIRED
    assert row.open_gaps == ()
    assert lifecycle.resolve(release) == []
    kept = Lifecycle(registry_with(manifest), auto_retire=False)
    (row,) = kept.status_at(release)
    assert row.status is Status.RETIRABLE


def test_a_hand_written_adapter_of_the_same_gap_stays_active(tmp_path: Path) -> None:
    data = {k: v for k, v in GOOD.items() if k not in ("generated", "bridges")}
    manifest, _ = parse(data)
    assert manifest is not None
    lifecycle = Lifecycle(registry_with(manifest))
    (row,) = lifecycle.status_at(str(lowers_histc(tmp_path)))
    assert row.status is Status.ACTIVE  # it names a gap, not ops: read through the gap
