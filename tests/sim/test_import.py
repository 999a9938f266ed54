"""``import spyre_sim`` loads no torch, and registers the device once torch is imported
(each case in a fresh process)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_catalogue_and_settings_load_without_torch() -> None:
    code = (
        "import sys, spyre_sim, spyre_sim.catalogue\n"
        "spyre_sim.builtin_catalogue().release('2026.05'); spyre_sim.current_stack()\n"
        "spyre_sim.telemetry.snapshot(); spyre_sim.settings.numerics\n"
        "print('torch' in sys.modules)\n"
    )
    assert run(code) == "False"


@pytest.mark.parametrize(
    "imports",
    ["import torch, spyre_sim", "import spyre_sim, torch"],
    ids=["torch-first", "sim-first"],
)
def test_the_device_registers_whichever_is_imported_first(imports: str) -> None:
    code = (
        f"{imports}\n"
        "t = torch.ones(2, dtype=torch.float16, device='spyre')\n"
        "print(t.device, type(t).__name__, spyre_sim.SpyreTensor is type(t))\n"
    )
    assert run(code) == "spyre:0 SpyreTensor True"


def test_the_device_registers_when_a_module_of_the_package_imports_torch() -> None:
    code = (
        "import spyre_sim.numerics, torch\n"
        "print(torch.ones(2, dtype=torch.float16, device='spyre').device)\n"
    )
    assert run(code) == "spyre:0"
