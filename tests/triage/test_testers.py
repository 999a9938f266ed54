"""Families built from the model testers of a Transformers test tree (a small tree of our own
here; the real one when SPYRE_TRANSFORMERS_TESTS names it), and the sweep over such a tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from spyre_adapters.enablement.results import Category
from spyre_adapters.enablement.sweep import isolated_triage, run_sweep

TREE = Path(__file__).resolve().parents[1] / "data" / "testers" / "tree"
FILE = "tests/models/tinyllama/test_modeling_tinyllama.py"


def test_test_files_of_a_tree() -> None:
    from spyre_adapters.enablement.testers import test_files

    assert test_files(TREE) == [FILE]


@pytest.mark.parametrize(("preset", "width"), [("tester", 32), ("tester-scaled", 256)])
def test_a_tester_file_is_triaged_in_a_worker(preset: str, width: int) -> None:
    (result,) = isolated_triage(FILE, ["2026.09"], preset=preset, testers=TREE, timeout=300)
    assert result.family == "llama"
    assert result.preset == preset
    assert result.category.built, result.detail
    assert result.kind == "causal-lm"
    assert result.fit == f"tester:{FILE}::TinyLlamaModelTest"
    assert result.adapted is not None or result.category is Category.NATIVE
    if width == 32:  # the tester's own sizes are not stick aligned: padding adapters apply
        assert result.adapted is not None
        assert any(a.startswith("stick-align-padding") for a in result.adapted.adapters)


def test_the_sweep_over_a_tree_reports_model_types(tmp_path: Path) -> None:
    report = run_sweep([FILE], ["2026.09"], preset="tester-scaled", testers=TREE, jobs=1)
    assert report.families == ["llama"]
    assert report.testers == str(TREE)
    document = report.to_json()
    assert document["testers"] == str(TREE)
    assert document["left_out"] == []
    assert document["summary"]["2026.09"]["built"] == 1


def test_a_file_whose_testers_cannot_be_made_is_left_out_with_the_reason(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    folder = tree / "tests" / "models" / "broken"
    folder.mkdir(parents=True)
    (tree / "src" / "transformers").mkdir(parents=True)
    (tree / "src" / "transformers" / "__init__.py").write_text("")
    for package in (tree / "tests", tree / "tests" / "models", folder):
        (package / "__init__.py").write_text("")
    (folder / "test_modeling_broken.py").write_text("raise ImportError('needs timm')\n")
    report = run_sweep(
        ["tests/models/broken/test_modeling_broken.py"],
        ["2026.09"],
        preset="tester",
        testers=tree,
        jobs=1,
    )
    (row,) = report.left_out()
    assert row["family"] == "broken"
    assert row["category"] == "build-failed"
    assert "needs timm" in row["detail"]


REAL = os.environ.get("SPYRE_TRANSFORMERS_TESTS")


@pytest.mark.skipif(not REAL, reason="SPYRE_TRANSFORMERS_TESTS names no Transformers test tree")
def test_the_real_tree_builds_bert_from_its_tester() -> None:
    assert REAL is not None
    from spyre_adapters.enablement.testers import test_files

    files = test_files(Path(REAL))
    bert = next(f for f in files if f.endswith("/bert/test_modeling_bert.py"))
    (result,) = [
        r
        for r in isolated_triage(bert, ["2026.09"], preset="tester", testers=Path(REAL))
        if r.family == "bert"
    ]
    assert result.category.built, result.detail


def test_a_family_that_does_not_build_scaled_is_built_at_the_testers_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from transformers import BertConfig, BertModel

    from spyre_adapters.enablement import testers
    from spyre_adapters.enablement.families import FamilyBuildError

    def make() -> tuple[object, dict[str, object], tuple[type, ...]]:
        config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=37, vocab_size=99)  # fmt: skip
        return config, {"input_ids": torch.randint(0, 99, (2, 7))}, (BertModel,)

    entry = testers.TesterEntry("bert", "tests/models/bert/test_x.py", "BertTest", make)
    scaled = testers.build_entry(entry, scaled=True)
    assert scaled.fit == "tester:tests/models/bert/test_x.py::BertTest"
    assert scaled.config.hidden_size == 256

    def refuse(config: object, preset: object) -> object:
        raise ValueError("derived widths")

    monkeypatch.setattr(testers, "scale_widths", refuse)
    fitted = testers.build_entry(entry, scaled=True)
    assert fitted.fit == "tester-sizes:tests/models/bert/test_x.py::BertTest"
    assert fitted.config.hidden_size == 32
    with pytest.raises(FamilyBuildError, match="derived widths"):
        testers._build_entry(entry, scaled=True, seed=0)


def test_importing_a_tree_keeps_the_hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tester that loads a config from the Hub fails at once instead of downloading (or
    waiting through the retries of an unreachable Hub)."""
    import huggingface_hub.constants as hub

    from spyre_adapters.enablement.testers import offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    offline()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert hub.HF_HUB_OFFLINE is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # an explicit choice of the user is kept
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    offline()
    assert hub.HF_HUB_OFFLINE is False


def test_tester_inputs_are_drawn_from_seeded_generators(monkeypatch: pytest.MonkeyPatch) -> None:
    """Transformers' testers draw inputs from a module-level ``random.Random`` of the tree's
    ``tests`` package (``global_rng``): it is seeded with the build's seed, as are Python's and
    torch's generators, so two builds give the same inputs."""
    import random
    import sys
    import types

    from spyre_adapters.enablement.testers import seed_testers

    common = types.ModuleType("tests.fake_common")
    common.global_rng = random.Random()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests.fake_common", common)

    def draw() -> tuple[list[int], float, list[float]]:
        rng = common.global_rng  # type: ignore[attr-defined]
        return [rng.randint(0, 99) for _ in range(8)], random.random(), torch.rand(3).tolist()

    seed_testers(0)
    first = draw()
    seed_testers(0)
    assert draw() == first
    seed_testers(1)
    assert draw() != first
