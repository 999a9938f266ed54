"""``benchmarks/bench_conformance.py``: junit parsing and the tables it prints (no test tree
needed: the runs are built here)."""

from __future__ import annotations

from pathlib import Path

from benchmark_scripts import load_benchmark

bench = load_benchmark("bench_conformance")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.models.llama.test_modeling_llama.LlamaModelTest"
          name="test_model" time="0.5"/>
<testcase classname="tests.models.llama.test_modeling_llama.LlamaModelTest"
          name="test_save_load" time="1.25"><failure message="x"/></testcase>
<testcase classname="tests.models.llama.test_modeling_llama.LlamaModelTest"
          name="test_save_load" time="0.25"><error message="teardown"/></testcase>
<testcase classname="tests.models.llama.test_modeling_llama.LlamaModelTest"
          name="test_training" time="0.1">
  <skipped message="spyre: inference-only device (runs backward)"/></testcase>
</testsuite></testsuites>
"""


def _tree(tmp_path: Path) -> Path:
    test_file = tmp_path / "tree" / "tests" / "models" / "llama" / "test_modeling_llama.py"
    test_file.parent.mkdir(parents=True)
    test_file.write_text("")
    return tmp_path


def test_junit_gives_each_test_its_outcome_and_its_time_over_every_phase(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    outcomes, times = bench._junit_outcomes(junit, _tree(tmp_path))
    base = "tests/models/llama/test_modeling_llama.py::LlamaModelTest::"
    assert outcomes == {
        base + "test_model": "passed",
        base + "test_save_load": "failed",  # the call's failure, not the teardown's error
        base + "test_training": bench.INFERENCE_ONLY,
    }
    assert times[base + "test_save_load"] == 1.5  # call and teardown reports added
    assert times[base + "test_model"] == 0.5


def test_the_test_time_table_leaves_out_tests_a_run_did_not_run() -> None:
    a, b, c = "t.py::A::test_model", "t.py::A::test_save_load", "t.py::B::test_model"
    cpu = bench.ModeRun("cpu", 10.0, {}, times={a: 1.0, b: 2.0, c: 1.0})
    faithful = bench.ModeRun("faithful", 30.0, {}, times={a: 4.0, b: 3.0, c: 3.0})
    functional = bench.ModeRun("functional", 20.0, {}, times={a: 2.0, b: 2.0})  # c: missing
    summary: dict[str, object] = {}
    lines = bench._test_times([cpu, faithful, functional], cpu, summary)
    assert summary["test_time"] == {
        "cpu": {"seconds": 3.0, "ratio": 1.0},
        "faithful": {"seconds": 7.0, "ratio": round(7 / 3, 3)},
        "functional": {"seconds": 4.0, "ratio": round(4 / 3, 3)},
    }
    assert summary["test_time_by_name"] == {
        "test_model": {"cpu": 1.0, "faithful": 4.0, "functional": 2.0},
        "test_save_load": {"cpu": 2.0, "faithful": 3.0, "functional": 2.0},
    }
    names = [line for line in lines if line.startswith("  ")]
    assert names[0].startswith("  test_model: 1.0, 4.0, 2.0")  # adds 3 s, the most


def test_no_test_time_table_when_the_runs_share_no_test() -> None:
    cpu = bench.ModeRun("cpu", 1.0, {}, times={"a": 1.0})
    device = bench.ModeRun("faithful", 1.0, {}, times={"b": 1.0})
    summary: dict[str, object] = {}
    assert bench._test_times([cpu, device], cpu, summary) == []
    assert summary == {}


def test_a_second_test_time_table_counts_only_the_tests_that_pass_on_the_cpu() -> None:
    a, b, c = "t.py::A::test_model", "t.py::A::test_on_accelerators", "t.py::A::test_broken"
    outcomes = {a: "passed", b: "skipped", c: "failed"}
    cpu = bench.ModeRun("cpu", 10.0, outcomes, times={a: 2.0, b: 0.0, c: 1.0})
    device = bench.ModeRun("faithful", 30.0, {}, times={a: 5.0, b: 40.0, c: 1.0})
    summary: dict[str, object] = {}
    lines = bench._test_times([cpu, device], cpu, summary)
    assert summary["test_time"] == {
        "cpu": {"seconds": 3.0, "ratio": 1.0},
        "faithful": {"seconds": 46.0, "ratio": round(46 / 3, 3)},
    }
    assert summary["test_time_cpu_passing"] == {
        "cpu": {"seconds": 2.0, "ratio": 1.0},
        "faithful": {"seconds": 5.0, "ratio": 2.5},
    }
    assert any("the 1 of them that pass on the CPU" in line for line in lines)


def test_no_second_table_when_every_common_test_passes_on_the_cpu() -> None:
    cpu = bench.ModeRun("cpu", 1.0, {"a": "passed"}, times={"a": 1.0})
    device = bench.ModeRun("faithful", 2.0, {}, times={"a": 2.0})
    summary: dict[str, object] = {}
    bench._test_times([cpu, device], cpu, summary)
    assert "test_time_cpu_passing" not in summary


def test_many_ids_go_to_pytest_in_a_file(tmp_path: Path) -> None:
    few = ["tests/models/bert/test_modeling_bert.py::BertModelTest::test_model"]
    assert bench._id_args(few, tmp_path / "few.ids") == few
    assert not (tmp_path / "few.ids").exists()
    many = [f"tests/models/x/test_modeling_x.py::XTest::test_{i}" for i in range(5000)]
    assert sum(map(len, many)) > bench.IDS_ON_COMMAND_LINE  # more than a command line holds
    args = bench._id_args(many, tmp_path / "many.ids")
    assert args == [f"@{tmp_path / 'many.ids'}"]
    assert (tmp_path / "many.ids").read_text().splitlines() == many


def test_only_the_tests_both_runs_collect_are_compared() -> None:
    cpu = ["t.py::A::test_model", "t.py::A::test_generate_0_cpu", "t.py::A::test_save_load"]
    device = ["t.py::A::test_save_load", "t.py::A::test_generate_0_spyre", "t.py::A::test_model"]
    common, apart = bench.common_ids(cpu, device)
    assert common == ["t.py::A::test_model", "t.py::A::test_save_load"]  # the CPU's order
    assert apart == ["t.py::A::test_generate_0_cpu", "t.py::A::test_generate_0_spyre"]
