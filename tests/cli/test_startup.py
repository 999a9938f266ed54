"""Commands that run no model import neither torch nor Transformers (each in a fresh process).

A behaviour, not a timing: the time is measured by ``benchmarks/bench_cli.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def imported(argv: list[str], cwd: Path) -> dict[str, object]:
    code = (
        "import json, sys\n"
        "from spyre_adapters.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code\n"
        "print(json.dumps({'code': code, 'torch': 'torch' in sys.modules,"
        " 'transformers': 'transformers' in sys.modules}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["sweep", "--help"], ["triage", "--help"], ["new", "--help"]],
    ids=" ".join,
)
def test_version_and_help_import_neither(argv: list[str], tmp_path: Path) -> None:
    assert imported(argv, tmp_path) == {"code": 0, "torch": False, "transformers": False}


COMMANDS = [
    ["stacks"],
    ["list"],
    ["show", "rope-rotation"],
    ["audit"],
    ["pin", "--stack", "2026.05", "-o", "x.lock"],
    ["check", "--lock", "x.lock"],  # after pin
]


Report = dict[str, object]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    """What each command imported, each run once (``pin`` first: ``check`` reads its lock)."""
    cwd = tmp_path_factory.mktemp("startup")
    return {" ".join(argv): imported(argv, cwd) for argv in COMMANDS}


@pytest.mark.parametrize("command", [" ".join(a) for a in COMMANDS])
def test_commands_that_run_no_model_do_not_import_transformers(
    command: str, reports: dict[str, Report]
) -> None:
    assert reports[command]["code"] == 0
    assert reports[command]["transformers"] is False


@pytest.mark.parametrize("command", [" ".join(a) for a in COMMANDS])
def test_commands_that_run_no_model_do_not_import_torch(
    command: str, reports: dict[str, Report]
) -> None:
    assert reports[command]["code"] == 0
    assert reports[command]["torch"] is False


def _modules(argv: list[str], cwd: Path) -> set[str]:
    code = (
        "import json, sys\n"
        "from spyre_adapters.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_command_imports_its_own_module_only(tmp_path: Path) -> None:
    listed = _modules(["--manifests", str(tmp_path), "list"], tmp_path)
    commands = {m for m in listed if m.startswith("spyre_adapters.cli._")}
    assert "spyre_adapters.cli._list" in commands
    assert not commands & {f"spyre_adapters.cli._{n}" for n in ("audit", "pin", "check", "sweep")}
    version = _modules(["--version"], tmp_path)
    assert "spyre_adapters.registry" not in version  # nothing a command needs
    assert "rich" not in version
    helped = _modules(["--help"], tmp_path)  # lists every command, with its help
    assert {"spyre_adapters.cli._audit", "spyre_adapters.cli._list"} <= helped
