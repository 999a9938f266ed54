"""``benchmarks/newer_tests_tree.py``: the shared tree with a newer release's common tests."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

newer = load_benchmark("newer_tests_tree")

OLD_COMMON = "class ModelTesterMixin:\n    def test_model(self):\n        pass\n"
NEW_COMMON = OLD_COMMON + "\n    def test_bc_cache_name_forward(self):\n        pass\n"


def _sdist(path: Path, members: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _tree(root: Path) -> Path:
    tests = root / "tree" / "tests"
    (tests / "models" / "bert").mkdir(parents=True)
    (tests / "models" / "bert" / "test_modeling_bert.py").write_text("# bert\n")
    (tests / "test_modeling_common.py").write_text(OLD_COMMON)
    (tests / "test_unchanged.py").write_text("same\n")
    (root / "run").write_text("#!/bin/sh\n")
    (root / "requirements.txt").write_text("transformers==5.15.1\nscipy==1.17.1\n")
    return root


def test_lays_the_sdists_top_level_tests_over_a_copy(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tt")
    sdist = _sdist(
        tmp_path / "transformers-5.25.0.tar.gz",
        {
            "transformers-5.25.0/tests/test_modeling_common.py": NEW_COMMON,
            "transformers-5.25.0/tests/test_unchanged.py": "same\n",
            "transformers-5.25.0/tests/test_memory_cleanup_mixin.py": "new\n",
            # not laid over: below tests/, or outside the release's tests
            "transformers-5.25.0/tests/models/bert/test_modeling_bert.py": "# newer bert\n",
            "transformers-5.25.0/src/transformers/__init__.py": "",
            "../escape.py": "",
        },
    )
    out = tmp_path / "out"
    assert newer.main(["--sdist", str(sdist), "--tree", str(tree), "--out", str(out)]) == 0
    tests = out / "tree" / "tests"
    assert (tests / "test_modeling_common.py").read_text() == NEW_COMMON
    assert (tests / "test_memory_cleanup_mixin.py").read_text() == "new\n"
    assert (tests / "models" / "bert" / "test_modeling_bert.py").read_text() == "# bert\n"
    assert (tree / "tree" / "tests" / "test_modeling_common.py").read_text() == OLD_COMMON
    assert not (tmp_path / "escape.py").exists()
    report = (out / "OVERLAY.txt").read_text()
    assert (
        "changed tests/test_modeling_common.py: 1 new tests (test_bc_cache_name_forward)" in report
    )
    assert "new tests/test_memory_cleanup_mixin.py" in report
    assert "test_unchanged" not in report
    assert (out / "requirements.txt").read_text().splitlines()[0] == "transformers==5.25.0"
    assert (out / "families.txt").read_text().strip() == "bert"
    assert (out / "run").is_file()


def test_refuses_what_is_not_a_transformers_sdist_and_keeps_finished_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tt")
    other = _sdist(tmp_path / "other-1.0.tar.gz", {"other-1.0/tests/test_x.py": ""})
    out = tmp_path / "out"
    assert newer.main(["--sdist", str(other), "--tree", str(tree), "--out", str(out)]) == 2
    assert "no transformers-<version>/tests/*.py" in capsys.readouterr().err
    assert not out.exists()
    assert not list(tmp_path.glob(".out.*"))  # no staging directory left behind
    bad = tmp_path / "broken.tar.gz"
    bad.write_bytes(b"not a tar file")
    assert newer.main(["--sdist", str(bad), "--tree", str(tree), "--out", str(out)]) == 2
    assert "cannot read --sdist" in capsys.readouterr().err
    out.mkdir()
    (out / "kept.txt").write_text("finished work")
    assert newer.main(["--sdist", str(other), "--tree", str(tree), "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert (out / "kept.txt").read_text() == "finished work"


def test_new_tests_are_the_methods_the_old_source_lacks() -> None:
    assert newer.new_tests(OLD_COMMON, NEW_COMMON) == ["test_bc_cache_name_forward"]
    assert newer.new_tests(NEW_COMMON, OLD_COMMON) == []
