"""The upgrade story, end to end, with real wheels: a team pins a third-party adapter, installs a
newer build of its distribution that adds a version, and the lock still applies exactly what it
pinned; ``check`` reports the newer version without failing, ``pin --upgrade`` moves the pin,
and an edited installed file is caught.

Both builds of ``acme-spyre-adapters`` are built with ``pip wheel`` (offline, no build
isolation: the environment's setuptools) and installed with ``pip install --no-index --no-deps``
into a temporary virtualenv that sees this environment's packages (torch, spyre-adapters) through
a ``.pth`` file, so pip upgrades the first build in place exactly as in a user's environment;
each phase runs in a fresh interpreter of that virtualenv, as a user's shell would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

PROJECT = "acme-spyre-adapters"

PYPROJECT = """
[build-system]
requires = ["setuptools>=70"]
build-backend = "setuptools.build_meta"

[project]
name = "acme-spyre-adapters"
version = "{version}"

[project.entry-points.spyre_adapters]
acme = "acme_spyre_adapters.plugin"

[tool.setuptools]
packages = ["acme_spyre_adapters"]

[tool.setuptools.package-data]
acme_spyre_adapters = ["manifests/*/*.toml"]
"""

PLUGIN = """
from importlib.resources import files

from spyre_adapters import hookimpl


@hookimpl
def spyre_adapters_register(registry):
    registry.load_directory(files("acme_spyre_adapters") / "manifests")
"""

MANIFEST = """
schema_version = 1
name = "acme-gelu"
version = "{version}"
kind = "scaffolding"
summary = "{summary}"
gaps = ["pow"]
families = ["acme"]
stacks = "{stacks}"
entry_point = "acme_spyre_adapters.{module}:adapter"
"""

# 1.0.0: the tanh GELU without pow; 2.0.0: the same function through sigmoid (x * s(2z)).
GELU = """
import math

import torch
from torch import nn


class {cls}(nn.Module):
    def forward(self, x):
        z = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return {formula}


class Adapter:
    def matches(self, model):
        return any(
            type(m) is nn.GELU and m.approximate == "tanh" for m in model.modules()
        )

    def apply(self, model, edit):
        for path, module in list(model.named_modules()):
            if type(module) is nn.GELU and module.approximate == "tanh":
                edit.replace_module(path, {cls}())


adapter = Adapter()
"""

V1 = {"cls": "AcmeGeluV1", "formula": "0.5 * x * (1.0 + torch.tanh(z))"}
V2 = {"cls": "AcmeGeluV2", "formula": "x * torch.sigmoid(2.0 * z)"}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def _source(root: Path, version: str, *, with_v2: bool) -> Path:
    files = {
        "pyproject.toml": PYPROJECT.format(version=version),
        "acme_spyre_adapters/__init__.py": f'__version__ = "{version}"\n',
        "acme_spyre_adapters/plugin.py": PLUGIN,
        "acme_spyre_adapters/gelu_v1.py": GELU.format(**V1),
        "acme_spyre_adapters/manifests/acme-gelu/1.0.0.toml": MANIFEST.format(
            version="1.0.0",
            summary="tanh GELU written without pow",
            stacks=">=2025.12",
            module="gelu_v1",
        ),
    }
    if with_v2:
        files["acme_spyre_adapters/gelu_v2.py"] = GELU.format(**V2)
        files["acme_spyre_adapters/manifests/acme-gelu/2.0.0.toml"] = MANIFEST.format(
            version="2.0.0",
            summary="tanh GELU as x * sigmoid(2z), for the stacks from 2026.02",
            stacks=">=2026.02",
            module="gelu_v2",
        )
    _write(root, files)
    return root


def _environment(root: Path) -> tuple[Path, Path]:
    """A virtualenv whose interpreter also sees this environment's packages; returns its
    interpreter and its site-packages folder."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    ours = sysconfig.get_paths()["purelib"]
    (site / "zz_outer_environment.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python, site


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _build_and_install(python: Path, source: Path, wheels: Path) -> None:
    _pip(
        python,
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        str(wheels),
        str(source),
    )
    version = (source / "acme_spyre_adapters" / "__init__.py").read_text().split('"')[1]
    (wheel,) = wheels.glob(f"acme_spyre_adapters-{version}-*.whl")
    _pip(python, "install", "--no-index", "--no-deps", str(wheel))


PHASE = """
import contextlib, io, json, sys
import torch
from spyre_adapters import build_registry, prepare
from spyre_adapters.cli import main

def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

def applied(stack, lock):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(approximate="tanh"))
    x = torch.randn(4, 8)
    with torch.no_grad():
        ref = model(x)
    prepared = prepare(model, stack, lock=lock, registry=build_registry())
    with torch.no_grad():
        same = torch.allclose(model(x), ref, atol=1e-6)
    return {"versions": [f"{a.name} {a.version}" for a in prepared.applied],
            "module": type(model[1]).__name__, "same_as_stock": same}

steps = {}
exec(sys.argv[1])
print(json.dumps(steps))
"""


def _phase(python: Path, cwd: Path, code: str) -> dict[str, dict[str, object]]:
    env = {**os.environ, "SPYRE_ADAPTERS_DISABLE": "builtin", "NO_COLOR": "1"}
    done = subprocess.run(
        [str(python), "-c", PHASE, textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, dict[str, object]] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_newer_build_of_a_third_party_distribution_keeps_the_lock_exact(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", minversion="70")
    wheels, work = tmp_path / "wheels", tmp_path / "work"
    for folder in (wheels, work):
        folder.mkdir()
    python, site = _environment(tmp_path / "env")

    # -- build 1.0.0 (acme-gelu 1.0.0), pin two releases ---------------------------------------
    _build_and_install(python, _source(tmp_path / "src-1.0.0", "1.0.0", with_v2=False), wheels)
    first = _phase(
        python,
        work,
        """
        steps["pin"] = cli("pin", "--stack", "2025.12", "--stack", "2026.02")
        steps["check"] = cli("check")
        """,
    )
    assert first["pin"]["code"] == 0, first["pin"]["err"]
    assert first["check"]["code"] == 0, first["check"]["err"]
    lock_text = (work / "spyre-adapters.lock").read_text()
    assert 'name = "acme-gelu"\nversion = "1.0.0"' in lock_text
    assert 'distribution = "acme-spyre-adapters"\ndistribution_version = "1.0.0"' in lock_text

    # -- build 1.1.0 over it: acme-gelu 1.0.0 unchanged, 2.0.0 added for 2026.02 and later -----
    _build_and_install(python, _source(tmp_path / "src-1.1.0", "1.1.0", with_v2=True), wheels)
    assert not list(site.glob("acme_spyre_adapters-1.0.0.dist-info"))  # really replaced
    assert list(site.glob("acme_spyre_adapters-1.1.0.dist-info"))
    second = _phase(
        python,
        work,
        """
        steps["list"] = cli("list", "--format", "json")
        steps["check"] = cli("check", "--format", "json")
        steps["locked"] = applied("2026.02", "spyre-adapters.lock")
        steps["unlocked"] = applied("2026.02", None)
        steps["upgrade"] = cli("pin", "--upgrade", "acme-gelu")
        steps["recheck"] = cli("check", "--format", "json")
        steps["locked_after"] = applied("2026.02", "spyre-adapters.lock")
        steps["old_release"] = applied("2025.12", "spyre-adapters.lock")
        import acme_spyre_adapters.gelu_v1 as installed
        with open(installed.__file__, "a") as handle:
            handle.write("# edited in site-packages\\n")
        steps["tampered"] = cli("check")
        try:
            applied("2025.12", "spyre-adapters.lock")
        except Exception as exc:
            steps["tampered_prepare"] = {"error": type(exc).__name__, "message": str(exc)}
        """,
    )
    listed = {
        a["version"]: a["superseded_at"] for a in json.loads(str(second["list"]["out"]))["adapters"]
    }
    assert listed == {
        "1.0.0": ["2026.02", "2026.03", "2026.05", "2026.06", "2026.07", "2026.08", "2026.09"],
        "2.0.0": [],
    }
    # check: the newer version is reported, the lock still passes
    check = second["check"]
    assert check["code"] == 0, check["err"]
    document = json.loads(str(check["out"]))
    assert document["passed"] is True
    kinds = sorted((f["release"], f["kind"]) for f in document["findings"])
    assert kinds == [("2025.12", "provider"), ("2026.02", "provider"), ("2026.02", "superseded")]
    superseded = next(f for f in document["findings"] if f["kind"] == "superseded")
    assert superseded["message"].startswith("pinned 1.0.0; 2.0.0 supersedes it at 2026.02")
    # the lock applies exactly what it pinned; without it, resolution takes 2.0.0
    assert second["locked"] == {
        "versions": ["acme-gelu 1.0.0"],
        "module": "AcmeGeluV1",
        "same_as_stock": True,
    }
    assert second["unlocked"]["versions"] == ["acme-gelu 2.0.0"]
    assert second["unlocked"]["module"] == "AcmeGeluV2"
    assert second["unlocked"]["same_as_stock"] is True
    # pin --upgrade moves that one pin, at the release where a newer version covers it
    upgrade = second["upgrade"]
    assert upgrade["code"] == 0, upgrade["err"]
    assert "acme-gelu 1.0.0 -> 2.0.0 at 2026.02" in str(upgrade["err"])
    assert "acme-gelu 1.0.0 unchanged at 2025.12" in str(upgrade["err"])
    recheck = json.loads(str(second["recheck"]["out"]))
    assert [(f["release"], f["kind"]) for f in recheck["findings"]] == [("2025.12", "provider")]
    assert second["locked_after"]["versions"] == ["acme-gelu 2.0.0"]
    assert second["old_release"]["versions"] == ["acme-gelu 1.0.0"]
    lock_text = (work / "spyre-adapters.lock").read_text()
    assert 'version = "2.0.0"\n' in lock_text
    assert 'distribution_version = "1.1.0"' in lock_text

    # -- an installed file of a pinned version edited after installation: tampered, exit 3 ----
    assert second["tampered"]["code"] == 3
    assert (
        'releases."2025.12" acme-gelu: tampered: implementation acme_spyre_adapters.gelu_v1:adapter '
        "hashes to" in str(second["tampered"]["err"])
    )
    assert second["tampered_prepare"]["error"] == "LockError"
