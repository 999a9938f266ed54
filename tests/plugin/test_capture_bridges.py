"""``--spyre-capture-bridges DIR``: a suite's refused ops inside the model scope become bridge
samples, and the generator plans adapters from them. Runs are subprocesses (plugin_runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_runs import pytest_subprocess

from spyre_adapters.enablement.captured import load_captures, plan_captured, read_sample_file

SUITE = """
import torch


class Dedup(torch.nn.Module):  # model code: judged by the catalogue
    def forward(self, ids):
        return torch.unique_consecutive(ids)


class Deduped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dedup = Dedup()

    def forward(self, ids):
        return self.dedup(ids) + 1


def ids(device):
    return torch.tensor([1, 1, 2, 3, 3, 3, 5, 1], device=device)


def test_model_meets_unique(spyre_device):
    assert Deduped()(ids(spyre_device)).cpu().tolist() == [2, 3, 4, 6, 2]


def test_model_meets_unique_again(spyre_device):
    assert Deduped()(ids(spyre_device)).cpu().tolist() == [2, 3, 4, 6, 2]


def test_longer_input(spyre_device):
    longer = torch.tensor([4, 4, 4, 2, 2, 7, 7, 7, 7, 1, 0, 0], device=spyre_device)
    assert Deduped()(longer).cpu().tolist() == [5, 3, 8, 2, 1]


def test_harness_unique(spyre_device):
    # the test's own work on device tensors: host semantics, nothing to bridge
    assert torch.unique_consecutive(ids(spyre_device)).cpu().tolist() == [1, 2, 3, 5, 1]
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_suite.py").write_text(SUITE, encoding="utf-8")
    return tmp_path


def test_refused_ops_in_the_model_scope_are_captured_with_where_they_were_met(
    suite: Path,
) -> None:
    out = suite / "captured"
    run = pytest_subprocess(
        suite, "--spyre", "--spyre-stack", "2026.09", f"--spyre-capture-bridges={out}", "-q"
    )
    # the outcomes are those of a run without the option: the op still stops the model
    run.fnmatch_lines(["spyre: captured 2 bridge samples of 1 refused*", "*3 failed, 1 passed*"])
    assert len(list(out.glob("capture-2026.09-*.pt"))) == 1
    assert len(list(out.glob("capture-2026.09-*.json"))) == 1
    captures = load_captures([out])
    assert list(captures) == ["aten.unique_consecutive.default"]
    (captured,) = captures.values()
    assert captured.gap == "static-shapes"
    assert captured.releases == ("2026.09",)
    # three tests met it in the model; the harness test did not count
    assert [t.split("::")[1] for t in captured.tests] == [
        "test_model_meets_unique",
        "test_model_meets_unique_again",
        "test_longer_input",
    ]
    # one sample per distinct signature, with the real values and where they came from
    assert [s.signature for s in captured.samples] == ["int32[8]", "int32[12]"]
    first = captured.samples[0]
    assert first.args[0].tolist() == [1, 1, 2, 3, 3, 3, 5, 1]
    assert first.args[0].device.type == "cpu"
    assert first.label == "captured by pytest in test_suite.py::test_model_meets_unique (dedup)"


def test_nothing_is_captured_without_a_refused_op(suite: Path) -> None:
    out = suite / "captured"
    run = pytest_subprocess(
        suite, "--spyre", f"--spyre-capture-bridges={out}", "-q", "-k", "harness"
    )
    run.fnmatch_lines(["spyre: no op was refused inside the model scope*", "*1 passed*"])
    assert not out.exists() or not list(out.iterdir())


def test_a_capture_folder_that_is_a_file_is_a_usage_error(suite: Path) -> None:
    (suite / "afile").write_text("", encoding="utf-8")
    run = pytest_subprocess(suite, "--spyre", "--spyre-capture-bridges=afile")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "--spyre-capture-bridges: 'afile'" in run.stderr
    assert "is not a directory" in run.stderr


def test_captured_samples_plan_a_host_bridge_where_the_op_is_refused(
    suite: Path, tmp_path: Path
) -> None:
    import spyre_sim
    from spyre_adapters.enablement.captured import write_sample_file
    from spyre_adapters.stacks import default_catalogue

    out = suite / "captured"
    pytest_subprocess(
        suite, "--spyre", "--spyre-stack", "2026.05", f"--spyre-capture-bridges={out}", "-q"
    )
    captures = load_captures([out])
    catalogue = default_catalogue()
    releases = [spyre_sim.resolve_stack(name) for name in ("2026.03", "2026.05", "2026.09")]
    (planned,) = plan_captured(captures, releases, catalogue)
    (version,) = planned.versions
    assert version.name == "bridge-unique-consecutive"
    assert version.candidate == "host"  # a data-dependent shape: nothing else holds
    assert version.kind == "permanent"  # static-shapes is a lasting gap
    assert version.releases == ("2026.05", "2026.09")
    assert version.stacks.startswith(">=2026.05")
    # at 2026.03 the host's results cannot come back (their empty inverse and counts meet the
    # zero-length rule): listed with the reason, not dropped
    assert any(note.startswith("no candidate at 2026.03") for note in planned.notes)
    assert "captured by pytest in test_suite.py::test_model_meets_unique (dedup)" in " ".join(
        version.checked
    )
    assert any("sizes doubled" in line for line in version.checked)
    kept = tmp_path / "kept.pt"
    write_sample_file(kept, version.op, list(planned.samples))
    op, samples = read_sample_file(kept)
    assert op == "aten.unique_consecutive.default"
    assert [s.signature for s in samples] == ["int32[8]", "int32[12]"]


def test_each_xdist_worker_writes_its_own_file_and_they_merge(suite: Path) -> None:
    out = suite / "captured"
    run = pytest_subprocess(
        suite,
        "--spyre",
        "--spyre-stack",
        "2026.09",
        f"--spyre-capture-bridges={out}",
        "-q",
        "-n",
        "2",
    )
    run.fnmatch_lines(["spyre: each xdist worker writes its bridge samples into*"])
    files = sorted(p.name for p in out.glob("capture-2026.09-*.pt"))
    assert files
    assert all(name.endswith(("-gw0.pt", "-gw1.pt")) for name in files)
    (captured,) = load_captures([out]).values()
    assert sorted(t.split("::")[1] for t in captured.tests) == [
        "test_longer_input",
        "test_model_meets_unique",
        "test_model_meets_unique_again",
    ]
    assert sorted(s.signature for s in captured.samples) == ["int32[12]", "int32[8]"]
