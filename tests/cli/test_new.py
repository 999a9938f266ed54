"""``spyre-adapters new``: a third-party adapter package that installs and lists as is.

The package is installed offline into a temporary target (``pip install --no-index
--no-build-isolation --no-deps --target``) and seen through ``PYTHONPATH`` by fresh processes,
as a user's environment would see it after ``pip install ./DIR``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from spyre_adapters.cli import ExitCode, main
from spyre_adapters.enablement.skeletons import manifest_skeleton
from spyre_adapters.manifest import load_manifest
from spyre_adapters.stacks import default_catalogue

PACKAGE = "spyre_adapter_sort_host"
FILES = [
    "README.md",
    "pyproject.toml",
    f"src/{PACKAGE}/__init__.py",
    f"src/{PACKAGE}/adapter.py",
    f"src/{PACKAGE}/manifests/sort-host/0.1.0.toml",
    f"src/{PACKAGE}/plugin.py",
    f"tests/test_{PACKAGE}.py",
]


def new(*argv: str) -> int:
    return main(["new", "sort-host", "--gap", "sort", *argv])


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def install(package: Path, target: Path) -> dict[str, str]:
    """Install ``package`` into ``target``; the environment of a process that sees it."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-build-isolation",
            "--no-deps",
            "--target",
            str(target),
            str(package),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))
    env.pop("SPYRE_ADAPTERS_DISABLE", None)
    return env


def cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    code = f"from spyre_adapters.cli import main; raise SystemExit(main({list(argv)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_new_writes_a_complete_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pkg"
    assert new("--family", "llama", "--out", str(out)) == ExitCode.OK
    assert tree(out) == FILES
    captured = capsys.readouterr()
    assert sorted(captured.out.splitlines()) == sorted(str(out / f) for f in FILES)
    assert "declines every model until matches() and apply() are written" in captured.err
    pyproject = tomllib.loads((out / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["entry-points"]["spyre_adapters"] == {PACKAGE: f"{PACKAGE}.plugin"}
    manifest = load_manifest(
        out / "src" / PACKAGE / "manifests" / "sort-host" / "0.1.0.toml",
        default_catalogue(),
        check_entry_point=False,
    )
    assert manifest.entry_point == f"{PACKAGE}.adapter:adapter"
    assert manifest.gaps == ("sort",)
    assert manifest.families == ("llama",)


def test_the_package_installs_and_lists_without_breaking_anything(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert new("--out", str(out)) == ExitCode.OK
    env = install(out, tmp_path / "site")
    listed = cli(env, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [a for a in json.loads(listed.stdout)["adapters"] if a["name"] == "sort-host"]
    assert row["entry_point"] == f"{PACKAGE}.adapter:adapter"
    assert row["source"].startswith(f"plugin {PACKAGE!r}")
    assert "rope-rotation" in {a["name"] for a in json.loads(listed.stdout)["adapters"]}
    audit = cli(env, "audit", "--format", "json")
    assert audit.returncode == 0, audit.stderr
    statuses = {a["name"]: a["status"] for a in json.loads(audit.stdout)["adapters"]}
    assert statuses["sort-host"] == "active"
    disabled = cli({**env, "SPYRE_ADAPTERS_DISABLE": PACKAGE}, "list", "--format", "json")
    assert "sort-host" not in {a["name"] for a in json.loads(disabled.stdout)["adapters"]}


def test_the_package_does_not_break_pytest_spyre(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert new("--out", str(out)) == ExitCode.OK
    env = install(out, tmp_path / "site")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_device.py").write_text(
        textwrap.dedent(
            """
            import torch

            def test_on_the_device(spyre_device):
                assert torch.ones(2, 64, dtype=torch.float16, device=spyre_device).sum() == 128
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--spyre", "-q", "-p", "no:cacheprovider", str(suite)],
        env=env,
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


# -- refused before anything is written ----------------------------------------------------------


def test_the_built_in_manifests_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.find_spec("spyre_adapters.manifests")
    assert spec is not None
    assert spec.submodule_search_locations
    builtin = Path(next(iter(spec.submodule_search_locations)))
    before = tree(builtin)
    target = builtin / "sort-host"
    assert new("--out", str(target)) == ExitCode.USAGE
    assert f"{target} is inside the manifests folder {builtin.resolve()}" in capsys.readouterr().err
    assert tree(builtin) == before


def test_a_manifests_folder_given_with_manifests_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    code = main(
        [
            "--manifests",
            str(folder),
            "new",
            "sort-host",
            "--gap",
            "sort",
            "--out",
            str(folder / "pkg"),
        ]
    )
    assert code == ExitCode.USAGE
    assert "is inside the manifests folder" in capsys.readouterr().err
    assert list(folder.iterdir()) == []


def test_a_directory_with_files_is_refused_an_empty_one_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert new("--out", str(busy)) == ExitCode.USAGE
    assert (
        f"cannot write {busy}: it exists and is not empty; choose a new directory with --out "
        "(`new` never writes over files)"
    ) in capsys.readouterr().err
    assert tree(busy) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert new("--out", str(empty)) == ExitCode.OK
    assert tree(empty) == FILES


def test_the_default_directory_is_the_adapter_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert new() == ExitCode.OK
    assert tree(tmp_path / "sort-host") == FILES
    assert new() == ExitCode.USAGE  # never over the first one


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["new", "Sort_Host", "--gap", "sort"], "'Sort_Host' is not a valid adapter name"),
        (["new", "x", "--gap", "no-such-gap"], "unknown gap ids 'no-such-gap'"),
        (["new", "x", "--gap", "sort", "--stack", "2026.04"], "unknown release '2026.04'"),
        (
            ["new", "rope-rotation", "--gap", "sort"],
            "adapter 'rope-rotation' is already registered",
        ),
        (["new", "x", "--gap", "sort", "--package", "os"], "a module named 'os' is already"),
        (["new", "x", "--gap", "sort", "--package", "a-b"], "package 'a-b' is not a Python"),
        (
            ["new", "x", "--gap", "core-span", "--kind", "scaffolding"],
            "a scaffolding adapter must bridge a transitional gap",
        ),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", str(tmp_path / "pkg")]) == ExitCode.USAGE
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written: list[Path] = []
    real = Path.write_text

    def fill_up(self: Path, *args: object, **kwargs: object) -> int:
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        written.append(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", fill_up)
    assert new("--out", str(tmp_path / "pkg")) == ExitCode.WRITE_FAILED
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert written  # it did start writing
    assert list(tmp_path.iterdir()) == []  # neither the package nor its staging folder


# -- TOML written by a TOML library ----------------------------------------------------------------

AWKWARD = 'two\nlines, "quotes", a \\ backslash, tab\t, unicode ü 日本 🙂, and """ three'


def test_the_manifest_skeleton_round_trips_any_value() -> None:
    text = manifest_skeleton(
        "odd-one", ["sort"], [AWKWARD, "llama"], "2026.05", summary=AWKWARD, entry_point="a.b:c"
    )
    data = tomllib.loads(text)
    assert data["summary"] == AWKWARD
    assert data["families"] == [AWKWARD, "llama"]
    assert data["entry_point"] == "a.b:c"
    assert text.startswith("# Skeleton written by spyre-adapters")


def test_new_writes_toml_that_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert new("--summary", AWKWARD, "--family", "llama", "--out", str(out)) == ExitCode.OK
    manifest = tomllib.loads(
        (out / "src" / PACKAGE / "manifests" / "sort-host" / "0.1.0.toml").read_text("utf-8")
    )
    assert manifest["summary"] == AWKWARD
    pyproject = tomllib.loads((out / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["description"] == " ".join(AWKWARD.split())  # one line


def test_suggested_manifests_round_trip() -> None:
    from spyre_adapters.enablement.results import GapHit
    from spyre_adapters.enablement.skeletons import suggest_manifest

    hit = GapHit("sort", 'aten.sort.default "x"\n', "model.layers.0\nü", 1, raised=True)
    data = tomllib.loads(suggest_manifest("sort", "llama", "2026.05", hit))
    assert 'aten.sort.default "x"\n' in data["summary"]
    assert "model.layers.0\nü" in data["summary"]


# -- the generated tests check something ---------------------------------------------------------

_WORKING = '''
from torch import nn


class SameLinear(nn.Module):
    """The first Linear, computed the same way (what an adapter may do)."""

    def __init__(self, inner: nn.Linear, scale: float) -> None:
        super().__init__()
        self.inner = inner
        self.scale = scale

    def forward(self, x):
        return nn.functional.linear(x, self.inner.weight, self.inner.bias) * self.scale


class SortHostAdapter:
    scale = 1.0

    def matches(self, model):
        return any(isinstance(m, nn.Linear) for m in model.modules())

    def apply(self, model, edit):
        path = next(p for p, m in model.named_modules() if isinstance(m, nn.Linear))
        edit.replace_module(path, SameLinear(model.get_submodule(path), self.scale))


adapter = SortHostAdapter()
'''


@pytest.mark.slow
def test_the_generated_tests_skip_pass_and_fail_as_they_should(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert new("--family", "llama", "--stack", "2026.09", "--out", str(out)) == ExitCode.OK

    installs = iter(range(3))

    def run_tests() -> subprocess.CompletedProcess[str]:
        env = install(out, tmp_path / f"site{next(installs)}")
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", "tests"],
            cwd=out,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    stub = run_tests()
    assert stub.returncode == 0, stub.stdout
    assert "2 skipped" in stub.stdout
    assert "sort-host does not match llama yet" in stub.stdout

    adapter = out / "src" / PACKAGE / "adapter.py"
    adapter.write_text(_WORKING)
    working = run_tests()
    assert working.returncode == 0, working.stdout
    assert "2 passed" in working.stdout

    adapter.write_text(_WORKING.replace("scale = 1.0", "scale = 1.01"))  # changes the math
    wrong = run_tests()
    assert wrong.returncode == 1, wrong.stdout
    assert (
        "FAILED tests/test_spyre_adapter_sort_host.py::test_same_output_as_the_stock_model_on_the_cpu[llama]"
        in wrong.stdout
    )
