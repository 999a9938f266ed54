"""Triage on the emulated device: the CLI, the pytest-xdist sweep items, audit --verify."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import tomllib

from spyre_adapters import build_registry, load_manifest
from spyre_adapters.cli import main
from spyre_adapters.enablement.classification import classify
from spyre_adapters.enablement.results import Category
from spyre_adapters.enablement.skeletons import manifest_skeleton
from spyre_adapters.registry import Registry
from spyre_adapters.stacks import default_catalogue

RELEASES = ["2026.05", "2026.09"]


def test_triage_llama_at_two_releases(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["triage", "llama", "--stack", RELEASES[0], "--stack", RELEASES[1], "--format", "json"]
    )
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "triage"
    assert [r["release"] for r in document["results"]] == RELEASES
    registry = build_registry()
    for row in document["results"]:
        stock = row["stock"]
        # realistic llama (head_dim 64, rotate_half RoPE) cannot run stock on any release
        assert not stock["ran"]
        raised = [g for g in stock["gaps"] if g["raised"]]
        assert raised
        assert all(g["module_path"] for g in raised)
        for gap, names in row["bridging"].items():
            assert names == sorted({m.name for m in registry.bridging(gap)})
        assert row["category"] == "adapted", row["detail"]
        assert row["adapted"]["comparison"]["matches"]
        assert row["adapted"]["adapters"]
    assert code == 0


def test_triage_json_verdict_is_classify(capsys: pytest.CaptureFixture[str]) -> None:
    from spyre_adapters.enablement.results import TriageResult

    main(["triage", "gpt2", "--stack", "2025.12", "--format", "json"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    result = TriageResult.from_json(row)
    assert result.stock is not None
    category, detail = classify(result.stock, result.adapted, result.bridging)
    assert (category.value, detail) == (row["category"], row["detail"])
    assert category is not Category.NATIVE  # 2025.12 has no embedding on device


def test_triage_table_and_unknown_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "no-such-family"]) == 2
    assert "unknown family 'no-such-family'" in capsys.readouterr().err
    main(["triage", "gpt2", "--tiny", "--stack", "2026.09"])
    out = capsys.readouterr().out
    assert "Triage of gpt2 (tiny sizes)" in out
    assert "2026.09" in out


def test_manifest_skeleton_is_a_valid_manifest(tmp_path: Path) -> None:
    text = manifest_skeleton("conv-host", ["conv2d"], ["vit"], "2026.03")
    data = tomllib.loads(text)
    assert data["kind"] == "scaffolding"
    assert data["retire_by"] == "2026.06"  # the first release closing conv2d
    assert data["stacks"] == ">=2026.03,<2026.06"
    path = tmp_path / "conv-host" / "0.1.0.toml"
    path.parent.mkdir()
    path.write_text(text)
    manifest = load_manifest(path, default_catalogue(), check_entry_point=False)
    assert manifest.gaps == ("conv2d",)
    lasting = tomllib.loads(manifest_skeleton("pad", ["core-span"], [], "2026.05"))
    assert lasting["kind"] == "permanent"
    assert "retire_by" not in lasting


def _hand_written(registry: Registry) -> Registry:
    """The registry without its generated adapters."""
    return registry.where(lambda m: not m.generated)


def _only(registry: Registry, name: str, families: tuple[str, ...]) -> Registry:
    """The registry with ``name`` verified on ``families`` only (a quick proof)."""
    reduced = Registry(registry.catalogue)
    reduced.add_all(
        dataclasses.replace(m, families=families) if m.name == name else m
        for m in registry.manifests()
    )
    return reduced


def test_verify_passes_when_the_stack_closed_the_gaps() -> None:
    from spyre_adapters.enablement.verify import verify_adapter

    registry = _only(build_registry(), "rms-norm", ("llama",))
    manifest = registry.get("rms-norm")
    verdict = verify_adapter(manifest, "2026.09", registry)
    assert verdict.verified, verdict.detail
    assert verdict.families[0].family == "llama"


def test_verify_fails_and_says_why_when_the_gap_is_open() -> None:
    from spyre_adapters.enablement.families import build_family
    from spyre_adapters.enablement.size_presets import REALISTIC
    from spyre_adapters.enablement.verify import verify_adapter
    from spyre_adapters.library.rotate_half_matmul import adapter as rotate_half_matmul

    # head-padding 2.0 computes rotate_half's cuts of heads narrower than 128 as matmuls,
    # which also keeps the rotate-half miscompile away: where stock rotate_half runs (as with
    # head-padding 1.0), rope-rotation is still needed at 2026.09. rotate-half-matmul, which
    # covers rotate-half too, stays installed: verify leaves it out of the run without
    # rope-rotation and names it (before, where it computes Llama's rotate_half, verify found
    # rope-rotation retirable at a release that still miscompiles rotate-half)
    full = _only(build_registry(), "rope-rotation", ("llama",))
    registry = full.where(lambda m: not (m.name == "head-padding" and m.version.major >= 2))
    manifest = registry.get("rope-rotation")
    verdict = verify_adapter(manifest, "2026.09", registry)
    assert not verdict.verified
    assert "rotate-half-matmul" in verdict.stand_ins
    assert "llama" in verdict.detail
    assert "gap `" in verdict.detail
    assert "rotate-half-matmul" in verdict.detail
    assert "llama (realistic-mqa): " in verdict.detail
    presets = ["realistic", "realistic-mqa", "realistic-odd"]  # each builds llama differently
    if rotate_half_matmul.matches(build_family("llama", preset=REALISTIC).model):
        # Transformers 5.15: Llama's apply_rotary_pos_emb is a plain function, so
        # rotate-half-matmul computes its rotate_half and the model runs without
        # rope-rotation; without both it stops first at rotate_half's sub-stick cuts, a gap
        # that is not rope-rotation's: whether the release closes rotate-half is not seen
        assert verdict.outcome.value == "unproven"
        assert [(c.preset, c.evidence.value) for c in verdict.families] == [
            (preset, "blocked") for preset in presets
        ]
        assert "a gap they cover that is not the adapter's" in verdict.detail
    else:
        # Transformers 5.25: a hub-kernel apply_rotary_pos_emb, which rotate-half-matmul does
        # not reach: without rope-rotation the model stops whether or not it is installed
        assert verdict.outcome.value == "refuted"
        assert [(c.preset, c.evidence.value) for c in verdict.families] == [
            (preset, "needs-adapter") for preset in presets
        ]
        assert "still needed" in verdict.detail


def test_the_stand_ins_of_an_adapter_cover_one_of_its_gaps_and_bridges_the_same_op() -> None:
    from spyre_adapters.enablement.verify import stand_ins

    registry = build_registry()
    # rope-rotation: sin-cos, rotate-half, offset-slice
    assert {"rotate-half-matmul", "fused-projection-split"} <= set(
        stand_ins(registry.get("rope-rotation"), registry)
    )
    assert "rope-rotation" in stand_ins(registry.get("rotate-half-matmul"), registry)
    assert "head-padding" not in stand_ins(registry.get("rope-rotation"), registry)
    # two op bridges of the catch-all gap stand in for each other only for the same op
    if "bridge-erf" in registry:
        assert stand_ins(registry.get("bridge-erf"), registry) == ()
    if "bridge-gather" in registry:
        gather = stand_ins(registry.get("bridge-gather"), registry)
        assert "host-gather" in gather  # hand-written, covers indirect-access
        assert "bridge-scatter-src" not in gather  # another op of the same gap


def test_a_family_blocked_by_another_gap_proves_nothing_either_way() -> None:
    from spyre_adapters.enablement.verify import Evidence, Outcome, verify_adapter

    # without the generated bridges (bridge-sort makes it run), mixtral stops at its MoE
    # router's sort at 2026.09, with or without rms-norm
    registry = _only(_hand_written(build_registry()), "rms-norm", ("llama", "mixtral"))
    verdict = verify_adapter(registry.get("rms-norm"), "2026.09", registry)
    assert verdict.outcome is Outcome.VERIFIED, verdict.detail
    assert [(c.family, c.evidence) for c in verdict.families] == [
        ("llama", Evidence.PROVES),
        ("llama", Evidence.PROVES),
        ("llama", Evidence.PROVES),
        ("mixtral", Evidence.BLOCKED),
        ("mixtral", Evidence.BLOCKED),
        ("mixtral", Evidence.BLOCKED),
    ]
    assert "3 prove nothing either way here: mixtral: blocked by something else" in verdict.detail
    assert "gap `sort`" in verdict.detail

    alone = _only(_hand_written(build_registry()), "rms-norm", ("mixtral",))
    unproven = verify_adapter(alone.get("rms-norm"), "2026.09", alone)
    assert unproven.outcome is Outcome.UNPROVEN
    assert not unproven.verified
    assert unproven.detail.startswith("no listed family can run at 2026.09, with or without it")


def test_an_unbuildable_family_proves_nothing() -> None:
    from spyre_adapters.enablement.verify import Evidence, Outcome, verify_adapter

    registry = _only(build_registry(), "rms-norm", ("no_such_model_type",))
    verdict = verify_adapter(registry.get("rms-norm"), "2026.09", registry)
    assert verdict.outcome is Outcome.UNPROVEN
    assert verdict.families[0].evidence is Evidence.UNBUILDABLE
    assert "cannot be built here" in verdict.detail


@pytest.mark.slow
def test_sweep_items_under_xdist(pytester: pytest.Pytester) -> None:
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess(
        "-p",
        "pytest_spyre.sweep_items",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--sweep-out",
        str(out),
        "--sweep-families",
        "gpt2,bert",
        "--sweep-releases",
        ",".join(RELEASES),
    )
    result.assert_outcomes(passed=4)
    document = json.loads((out / "sweep.json").read_text())
    assert sorted((r["family"], r["release"]) for r in document["results"]) == sorted(
        (f, r) for f in ("bert", "gpt2") for r in RELEASES
    )
    assert document["summary"][RELEASES[1]]["total"] == 2
    assert (out / "sweep.html").exists()
    result.stdout.fnmatch_lines(["*spyre-adapters sweep*", "2026.09: * enabled*"])


def test_sweep_cli_slice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "sweep",
            "gpt2",
            "vit",
            "--stack",
            RELEASES[0],
            "--stack",
            RELEASES[1],
            "-j",
            "2",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    document = json.loads((tmp_path / "sweep.json").read_text())
    assert document["families"] == ["gpt2", "vit"]
    assert len(document["results"]) == 4
    assert all(r["category"] in {c.value for c in Category} for r in document["results"])
    assert "Families per release" in capsys.readouterr().out
