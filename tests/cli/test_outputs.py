"""Output paths of ``spyre-adapters``: checked before any work, written whole, never lost.

The sweep is replaced by a stand-in (``run_sweep``), so each test knows whether the work ran
and what it produced; ``/dev/full`` (every write fails with ENOSPC) plays a full disk.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import spyre_adapters.enablement.families
import spyre_adapters.enablement.sweep
from spyre_adapters._outputs import (
    OutputPathError,
    check_directory,
    check_file,
    check_new_directory,
    save,
    write_text,
    write_tree,
)
from spyre_adapters.cli import ExitCode, main
from spyre_adapters.enablement.results import Category, TriageResult
from spyre_adapters.enablement.sweep import SweepReport, run_sweep

FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")


class Sweeps:
    """The stand-in sweep: records each call, returns a native result per pair."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def __call__(self, families: Sequence[str], releases: Sequence[str], **_: Any) -> SweepReport:
        self.calls.append((list(families), list(releases)))
        results = [
            TriageResult(f, r, "realistic", Category.NATIVE, "stand-in")
            for f in families
            for r in releases
        ]
        return SweepReport(
            releases=list(releases),
            families=sorted(families),
            preset="realistic",
            layout_checks=True,
            results=results,
        )


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> Sweeps:
    stand_in = Sweeps()
    monkeypatch.setattr(spyre_adapters.enablement.sweep, "run_sweep", stand_in)
    return stand_in


Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("NO_COLOR", "1")

    def invoke(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


SWEEP = ("sweep", "gpt2", "--stack", "2026.09", "--no-progress")


# -- checked before the work -------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--json", "--html", "--log", "-o"])
def test_sweep_file_in_a_missing_directory_is_refused_before_sweeping(
    option: str, sweeps: Sweeps, cli: Cli, tmp_path: Path
) -> None:
    bad = tmp_path / "missing" / "s.out"
    code, out, err = cli(*SWEEP, "--out", str(tmp_path / "o"), option, str(bad))
    assert code == ExitCode.USAGE
    assert f"cannot write {bad}: directory {bad.parent} does not exist" in err
    assert "create it first, or choose another path" in err
    assert sweeps.calls == []
    assert out == ""
    assert not (tmp_path / "o").exists()


def test_the_issue_example_exits_2_at_once(sweeps: Sweeps, cli: Cli) -> None:
    code, _, err = cli(*SWEEP, "--json", "/nonexistent/d/s.json")
    assert code == ExitCode.USAGE
    assert "argument --json: cannot write /nonexistent/d/s.json" in err
    assert sweeps.calls == []


def test_sweep_json_naming_a_directory_is_refused(sweeps: Sweeps, cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli(*SWEEP, "--out", str(tmp_path), "--json", str(tmp_path))
    assert code == ExitCode.USAGE
    assert f"cannot write {tmp_path}: it is a directory (name a file in it" in err
    assert sweeps.calls == []


def test_sweep_out_that_is_a_file_is_refused(sweeps: Sweeps, cli: Cli, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for out in (afile, afile / "below"):
        code, _, err = cli(*SWEEP, "--out", str(out))
        assert code == ExitCode.USAGE
        assert f"argument --out: cannot write {out}" in err
    assert afile.read_text() == "keep me"
    assert sweeps.calls == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_sweep_out_in_a_read_only_directory_is_refused(
    sweeps: Sweeps, cli: Cli, tmp_path: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, _, err = cli(*SWEEP, "--out", str(locked / "o"))
    finally:
        locked.chmod(0o700)
    assert code == ExitCode.USAGE
    assert "not writable" in err
    assert sweeps.calls == []


def test_triage_output_is_checked_before_the_model_is_built(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the family was built despite the bad output path")

    monkeypatch.setattr(spyre_adapters.enablement.families, "build_family", no_build)
    bad = tmp_path / "missing" / "t.json"
    code, _, err = cli("triage", "gpt2", "--format", "json", "-o", str(bad))
    assert code == ExitCode.USAGE
    assert f"argument -o/--output: cannot write {bad}" in err


def test_every_command_output_option_is_checked(cli: Cli, tmp_path: Path) -> None:
    for command in (["stacks"], ["list"], ["audit"], ["show", "rope-rotation"]):
        code, _, err = cli(*command, "-o", str(tmp_path))
        assert code == ExitCode.USAGE, command
        assert "it is a directory" in err


# -- what a sweep writes -----------------------------------------------------------------------


def test_sweep_saves_json_html_and_log_in_out(sweeps: Sweeps, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "sweep-out"
    (out.parent).mkdir()
    code, stdout, err = cli(*SWEEP, "--out", str(out))
    assert code == ExitCode.OK
    document = json.loads((out / "sweep.json").read_text("utf-8"))
    assert document["kind"] == "sweep"
    assert [(r["family"], r["release"]) for r in document["results"]] == [("gpt2", "2026.09")]
    assert (out / "sweep.html").read_text("utf-8").startswith("<!DOCTYPE html>")
    assert (out / "results.jsonl").exists()
    assert f"wrote {out / 'sweep.json'}" in err
    assert f"wrote {out / 'sweep.html'}" in err
    assert "Families per release" in stdout


def test_sweep_default_out_is_sweep_out_in_the_working_directory(
    sweeps: Sweeps, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(*SWEEP)[0] == ExitCode.OK
    assert sorted(p.name for p in (tmp_path / "sweep-out").iterdir()) == [
        "results.jsonl",
        "sweep.html",
        "sweep.json",
    ]


def test_sweep_files_given_one_by_one_leave_out_alone(
    sweeps: Sweeps, cli: Cli, tmp_path: Path
) -> None:
    files = [tmp_path / n for n in ("a.json", "a.html", "a.jsonl")]
    code, _, _ = cli(
        *SWEEP,
        "--out",
        str(tmp_path / "unused"),
        "--json",
        str(files[0]),
        "--html",
        str(files[1]),
        "--log",
        str(files[2]),
    )
    assert code == ExitCode.OK
    assert json.loads(files[0].read_text())["families"] == ["gpt2"]
    assert files[1].exists()
    assert not (tmp_path / "unused").exists()


# -- never lost after the work -----------------------------------------------------------------


@needs_dev_full
def test_a_full_disk_after_the_sweep_keeps_the_results(
    sweeps: Sweeps, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fallback_dir = tmp_path / "tmp"
    fallback_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback_dir))
    code, _, err = cli(*SWEEP, "--out", str(tmp_path / "o"), "--json", str(FULL))
    assert code == ExitCode.WRITE_FAILED
    assert len(sweeps.calls) == 1
    assert f"could not write the sweep JSON to {FULL} (No space left on device); saved it to" in err
    (kept,) = fallback_dir.glob("spyre-adapters-full-*")
    assert json.loads(kept.read_text())["families"] == ["gpt2"]
    assert str(kept) in err
    assert (tmp_path / "o" / "sweep.html").exists()  # the other outputs are written as asked


@needs_dev_full
def test_results_no_file_can_take_go_to_stdout(
    sweeps: Sweeps, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-dir"))
    code, out, err = cli(*SWEEP, "--out", str(tmp_path / "o"), "--json", str(FULL))
    assert code == ExitCode.WRITE_FAILED
    assert "could not write the sweep JSON to /dev/full" in err
    assert "it follows on stdout" in err
    _, _, document = out.partition("Families per release")[2].partition("\n{")
    assert json.loads("{" + document)["families"] == ["gpt2"]


@needs_dev_full
def test_json_on_stdout_is_not_printed_twice(
    sweeps: Sweeps, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-dir"))
    code, out, _ = cli(*SWEEP, "--format", "json", "--out", str(tmp_path), "--json", str(FULL))
    assert code == ExitCode.WRITE_FAILED
    assert json.loads(out)["kind"] == "sweep"  # one document, exactly


@needs_dev_full
def test_an_output_file_that_fails_keeps_the_output(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code, out, err = cli("stacks", "--format", "json", "-o", str(FULL))
    assert code == ExitCode.WRITE_FAILED
    assert out == ""
    (kept,) = tmp_path.glob("spyre-adapters-full-*")
    assert json.loads(kept.read_text())["kind"] == "stacks"
    assert f"saved it to {kept}" in err


@needs_dev_full
def test_a_log_that_fails_mid_sweep_does_not_stop_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def isolated(family: str, releases: Sequence[str], **_: object) -> list[TriageResult]:
        return [TriageResult(family, r, "realistic", Category.NATIVE, "stand-in") for r in releases]

    monkeypatch.setattr(spyre_adapters.enablement.sweep, "isolated_triage", isolated)
    report = run_sweep(["a", "b", "c"], ["2026.05"], jobs=1, log=FULL)
    assert sorted(r.family for r in report.results) == ["a", "b", "c"]
    err = capsys.readouterr().err
    assert err.count("could not append to the sweep log /dev/full") == 1  # said once
    assert "every result is kept for the final report" in err


def test_sweep_items_check_their_directory_before_running(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    result = pytester.runpytest("-p", "pytest_spyre.sweep_items", "--sweep-out", str(afile))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--sweep-out: cannot write {afile}: it exists and is not a*"])


# -- the primitives ----------------------------------------------------------------------------


def test_write_text_replaces_whole_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o640)
    write_text(target, "new ü")
    assert target.read_text("utf-8") == "new ü"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_write_text_gives_a_new_file_the_usual_mode(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        write_text(tmp_path / "n.txt", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "n.txt").stat().st_mode) == 0o640


def test_write_text_writes_devices_in_place() -> None:
    null = Path("/dev/null")
    if not null.is_char_device():
        pytest.skip("no /dev/null")
    write_text(null, "discarded")
    assert null.is_char_device()  # written to, never replaced by a file


@needs_dev_full
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    real = os.replace

    def full_disk(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    os.replace = full_disk  # type: ignore[assignment]
    try:
        with pytest.raises(OSError, match="No space"):
            write_text(target, "new")
    finally:
        os.replace = real
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_save_reports_where_the_text_went(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = save(tmp_path / "ok.txt", "x")
    assert saved.ok
    assert saved.path == tmp_path / "ok.txt"
    assert saved.message("it") == f"wrote {tmp_path / 'ok.txt'}"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    missing = tmp_path / "gone" / "r.json"
    saved = save(missing, "x")
    assert not saved.ok
    assert saved.path is not None
    assert saved.path.parent == tmp_path
    assert saved.path.name.startswith("spyre-adapters-r-")
    assert saved.path.suffix == ".json"
    assert saved.path.read_text() == "x"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p, "it is a directory"),
        (lambda p: p / "no" / "x.json", "does not exist"),
        (lambda p: "", "the path is empty"),
    ],
)
def test_check_file_says_why(
    make: Callable[[Path], Path | str], reason: str, tmp_path: Path
) -> None:
    with pytest.raises(OutputPathError, match=reason) as caught:
        check_file(make(tmp_path))
    assert caught.value.path == Path(make(tmp_path))


def test_check_directory_accepts_what_it_can_create(tmp_path: Path) -> None:
    assert check_directory(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # checking creates nothing
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputPathError, match="not a directory"):
        check_directory(tmp_path / "f" / "b")


def test_check_new_directory_refuses_a_file_or_a_directory_with_files(tmp_path: Path) -> None:
    assert check_new_directory(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert check_new_directory(tmp_path / "empty") == tmp_path / "empty"
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputPathError, match="exists and is not a directory"):
        check_new_directory(tmp_path / "file")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(OutputPathError, match="exists and is not empty"):
        check_new_directory(tmp_path / "busy")


def test_write_tree_creates_the_whole_tree_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write_tree(tmp_path / "empty", {"a.txt": "A", "sub/b.txt": "B"})
    assert (tmp_path / "empty" / "sub" / "b.txt").read_text() == "B"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]
    real = Path.write_text
    calls = []

    def fails_second(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        calls.append(self)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, text, *args, **kwargs)

    Path.write_text = fails_second  # type: ignore[method-assign]
    try:
        with pytest.raises(OSError, match="No space"):
            write_tree(tmp_path / "half", {"a.txt": "A", "b.txt": "B"})
    finally:
        Path.write_text = real  # type: ignore[method-assign]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]
