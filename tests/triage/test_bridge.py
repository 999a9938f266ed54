"""The bridge loop on real families: T5's isinf, OLMoE's MoE routing, what no candidate can
bridge, the re-validation of installed bridges, and the generated adapters it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spyre_adapters import build_registry, builtin, default_registry
from spyre_adapters.cli import main
from spyre_adapters.enablement.bridge import bridge_family, installed_bridges, without_generated
from spyre_adapters.enablement.families import build_family
from spyre_adapters.enablement.generation import (
    adapter_name,
    manifest_text,
    module_text,
    plan_versions,
    versions_of,
)
from spyre_adapters.enablement.size_presets import TINY
from spyre_adapters.manifest import parse_manifest
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import default_catalogue

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def hand_written() -> Registry:
    return without_generated(build_registry(entry_points=False, plugins=[builtin]))


def test_t5_runs_once_isinf_is_bridged(hand_written: Registry) -> None:
    result = bridge_family(build_family("t5"), "2026.09", registry=hand_written)
    assert result.outcome == "bridged", result.detail
    assert result.table == {"aten.isinf.default": "decomposition"}
    (item,) = result.bridged
    assert item.module_path is not None
    assert item.module_path.startswith("encoder.block.0")
    assert item.holds
    assert result.run is not None
    assert result.run.comparison is not None
    assert result.run.comparison.matches
    assert "op bridges under validation" in result.run.adapters


def test_olmoe_moe_routing_is_bridged_with_rewrites_and_the_host(hand_written: Registry) -> None:
    result = bridge_family(build_family("olmoe"), "2026.09", registry=hand_written)
    assert result.outcome == "bridged", result.detail
    assert result.table == {
        "aten.sort.default": "host",
        "aten.histc.default": "host",
        "aten._grouped_mm.default": "rewrite",
    }
    # histc's rewrite holds at the tiny model's expert count, not at a real one's
    histc = next(b for b in result.bridged if b.op == "aten.histc.default")
    assert [v.candidate for v in histc.verdicts] == ["rewrite", "host"]
    assert histc.verdicts[0].reason.startswith("mismatch on sizes + 60")
    # the sort has no decomposition: the host is the only candidate, and it was checked
    sort = next(b for b in result.bridged if b.op == "aten.sort.default")
    assert [v.candidate for v in sort.verdicts] == ["host"]
    assert len([c for c in sort.verdicts[0].checks if c.counts]) >= 5


def test_what_no_candidate_can_bridge_is_listed_with_the_reason(hand_written: Registry) -> None:
    # no padding adapter: the tiny llama stops at a layout rule, which no op form changes
    reduced = Registry(hand_written.catalogue)
    reduced.add_all((m for m in hand_written.manifests() if "padding" not in m.name), source="test")
    result = bridge_family(build_family("llama", preset=TINY), "2026.09", registry=reduced)
    assert result.outcome == "unbridged"
    assert result.unbridged
    assert result.unbridged[0].why == "layout"
    assert result.unbridged[0].gap in ("stick-align", "sub-stick-head")
    assert "changes the model's layout" in result.unbridged[0].detail
    assert result.detail.startswith("no candidate could bridge")


def test_installed_bridges_are_reused_and_revalidated() -> None:
    registry = default_registry()
    if not installed_bridges(registry, default_catalogue().releases[-1]):  # type: ignore[arg-type]
        pytest.skip("no generated bridge is installed")
    import spyre_sim

    at = spyre_sim.resolve_stack("2026.09")
    assert "aten.isinf.default" in installed_bridges(registry, at)
    result = bridge_family(build_family("t5"), "2026.09", registry=registry)
    assert result.outcome == "runs", result.detail
    (item,) = [b for b in result.bridged if b.op == "aten.isinf.default"]
    assert item.adapter == "bridge-isinf"
    assert item.holds


def test_generated_versions_validate_as_manifests(hand_written: Registry) -> None:
    import spyre_sim

    result = bridge_family(build_family("t5"), "2026.09", registry=hand_written)
    (item,) = result.bridged
    releases = [spyre_sim.resolve_stack(r.name) for r in default_catalogue().releases]
    plans, failed = plan_versions(item.op, list(item.captured), releases)
    assert plans
    assert plans[-1].releases[-1] == "2026.09"
    assert set(failed) | {r for p in plans for r in p.releases} == {r.name for r in releases}
    versions = versions_of(
        item.op, item.gap, False, plans, {"2026.09": ["t5"]}, default_catalogue()
    )
    assert [v.version for v in versions] == [f"1.{i}.0" for i in range(len(versions))]
    for version in versions:
        assert version.name == adapter_name(item.op) == "bridge-isinf"
        data = tomllib.loads(manifest_text(version))
        manifest, problems = parse_manifest(
            data, where="generated", catalogue=default_catalogue(), check_entry_point=False
        )
        assert problems == []
        assert manifest is not None
        assert manifest.generated
        assert manifest.bridges[0].candidate == version.candidate
        assert f'OpBridge({{"aten.isinf.default": "{version.candidate}"}})' in module_text(version)
        # the first form's candidates keep the released text: planning again gives the same
        assert "from spyre_adapters.library.op_bridge_v2 import OpBridge" in module_text(version)
    import dataclasses

    wider = dataclasses.replace(versions[-1], candidate="host-float32")
    assert "from spyre_adapters.library.op_bridge_v3 import OpBridge" in module_text(wider)
    namespace: dict[str, object] = {}
    exec(compile(module_text(wider), "generated", "exec"), namespace)  # the module runs
    assert namespace["adapter"].table == {"aten.isinf.default": "host-float32"}  # type: ignore[attr-defined]
    assert versions[-1].stacks == f">={plans[-1].releases[0]}"
    assert versions[-1].families == ("t5",)


def test_cli_bridge_json_and_the_package_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "builtin")
    manifests = tmp_path / "hand-written"
    for manifest in build_registry(entry_points=False, plugins=[builtin]).manifests():
        if manifest.generated:
            continue
        target = manifests / manifest.name / Path(manifest.source).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(manifest.source).read_bytes())
    out = tmp_path / "package"
    code = main(
        [
            "--manifests",
            str(manifests),
            "bridge",
            "t5",
            "--stack",
            "2026.09",
            "--write",
            str(out),
            "--format",
            "json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["kind"] == "bridge"
    assert document["result"]["outcome"] == "bridged"
    assert document["result"]["table"] == {"aten.isinf.default": "decomposition"}
    package = out / "src" / "spyre_adapter_bridges_t5"
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert "pyproject.toml" in written
    assert any(
        w.startswith("src/spyre_adapter_bridges_t5/manifests/bridge-isinf/") for w in written
    )
    for toml in (package / "manifests").rglob("*.toml"):
        _, problems = parse_manifest(
            tomllib.loads(toml.read_text("utf-8")),
            where=str(toml),
            catalogue=default_catalogue(),
            check_entry_point=False,
        )
        assert problems == []
    assert (out / "tests" / "test_spyre_adapter_bridges_t5.py").is_file()


def test_cli_bridge_refuses_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bridge", "no-such-family"]) == 2
    assert "unknown family" in capsys.readouterr().err
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    assert main(["bridge", "t5", "--write", str(full)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["bridge", "t5", "--testers", str(tmp_path)]) == 2
    assert "not a Transformers test tree" in capsys.readouterr().err


def test_a_release_that_lowers_the_op_retires_its_bridge_proved_by_audit_verify(
    tmp_path: Path,
) -> None:
    from spyre_adapters import Lifecycle, Status
    from spyre_adapters.enablement.verify import Outcome, verify_adapter

    registry = default_registry()
    if "bridge-isinf" not in registry:
        pytest.skip("bridge-isinf is not installed")
    path = tmp_path / "2026.11.toml"
    path.write_text(
        'schema_version = 1\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        'date = 2026-11-20\nsummary = "2026.09 + isinf on the device"\n'
        '[ops]\n"aten.isinf" = { decision = "native", note = "an isinf kernel lands" }\n',
        encoding="utf-8",
    )
    lifecycle = Lifecycle(registry)
    release = lifecycle.release(str(path))
    row = next(r for r in lifecycle.status_at(release) if r.name == "bridge-isinf")
    assert row.status is Status.RETIRED
    at_2026_09 = next(r for r in lifecycle.status_at("2026.09") if r.name == "bridge-isinf")
    assert at_2026_09.status is Status.ACTIVE
    # what `spyre-adapters audit --stack 2026.11.toml --verify` runs for it
    verdict = verify_adapter(row.manifest, release, registry)
    assert verdict.outcome is Outcome.VERIFIED, verdict.detail
    assert any(c.family == "t5" and c.passed for c in verdict.families)


def test_a_mismatch_of_a_forward_that_draws_random_numbers_is_not_judged() -> None:
    """As in triage: the bridge loop does not report a family whose CPU reference does not
    reproduce as a mismatch of the device."""
    from triage_standins import noisy_family

    noisy = bridge_family(noisy_family(noisy=True), "2026.09")
    assert noisy.outcome == "not-judged"
    assert noisy.detail.startswith("not judged: two CPU forwards of the stock model differ")
    assert not noisy.enabled
    assert bridge_family(noisy_family(noisy=False), "2026.09").outcome in ("runs", "bridged")
