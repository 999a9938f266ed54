"""The Transformers test-device contract, set up before a suite's conftest is imported.

``transformers.testing_utils`` picks ``torch_device`` once, when it is first imported:

- ``TRANSFORMERS_TEST_BACKEND`` names a module it imports first (for out-of-tree backends);
  we set it to ``spyre_sim``, whose import registers the ``spyre`` device, so even a process
  that imports ``testing_utils`` without this plugin's help (a subprocess a test spawns, an
  xdist worker) gets the device;
- ``TRANSFORMERS_TEST_DEVICE`` becomes ``torch_device`` after a ``torch.device(...)`` check,
  which only passes once the device is registered;
- the ``backend_*`` dispatch tables (``backend_manual_seed``, ``backend_empty_cache``,
  ``backend_device_count``, memory statistics, ...) fall back to their ``"default"`` entries
  for an unknown device: ``torch.manual_seed`` (the emulated device draws its random numbers on
  the host, so this is the right seed), no-op cache clearing, one device, zero bytes. So no
  ``TRANSFORMERS_TEST_DEVICE_SPEC`` file is needed (it would have to be a bare file name
  importable from the working directory); we leave that variable alone and refuse a value that
  names another device.

Tests that re-run themselves in a child process (Transformers' ``run_test_using_subprocess``
starts ``python -m pytest <test>`` with a copy of the environment) must see the same device:
so the run's settings are exported as the plugin's own environment variables (``SPYRE=1``,
``SPYRE_STACK``, ``SPYRE_NUMERICS``, ``SPYRE_LAYOUT_CHECKS``, ``SPYRE_UNSUPPORTED``,
``SPYRE_HARNESS``, ``SPYRE_COMPARE``, ``SPYRE_LOCK`` as an absolute path), and the ones that
name outputs of this run (``SPYRE_REPORT``, ``SPYRE_EXPECTATIONS``) are removed, so a child
never overwrites the parent's report or judges the parent's expectations.

The previous values are restored when the run ends (:meth:`ContractState.leave`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_spyre.options import SpyreOptions

__all__ = ["BACKEND_MODULE", "DEVICE", "ContractState", "child_environment", "enter_contract"]

DEVICE = "spyre"
BACKEND_MODULE = "spyre_sim"
_VARIABLES = ("TRANSFORMERS_TEST_DEVICE", "TRANSFORMERS_TEST_BACKEND")
_RUN_OUTPUTS = ("SPYRE_REPORT", "SPYRE_EXPECTATIONS")


@dataclass
class ContractState:
    """Environment values replaced by :func:`enter_contract`, to put back at the end."""

    saved: dict[str, str | None] = field(default_factory=dict)

    def leave(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved.clear()


def child_environment(options: SpyreOptions) -> dict[str, str | None]:
    """The plugin's environment variables that give a child process this run's settings
    (``None``: remove the variable)."""
    env: dict[str, str | None] = {
        "SPYRE": "1",
        "SPYRE_NUMERICS": "on" if options.numerics else "off",
        "SPYRE_LAYOUT_CHECKS": "on" if options.layout_checks else "off",
        "SPYRE_UNSUPPORTED": options.unsupported,
        "SPYRE_HARNESS": options.harness,
        "SPYRE_COMPARE": "1" if options.compare else "0",
        "SPYRE_LOCK": str(options.lock.resolve()) if options.lock is not None else None,
        "SPYRE_STACK": None,
    }
    if options.stack is not None:
        spec = options.stack
        env["SPYRE_STACK"] = str(Path(spec).resolve()) if Path(spec).is_file() else spec
    for name in _RUN_OUTPUTS:
        env[name] = None
    return env


def enter_contract(options: SpyreOptions | None = None) -> ContractState:
    """Register the device, point the Transformers test-device variables at it and (given the
    run's options) export them for child processes."""
    import spyre_sim

    spyre_sim.register()
    spec = os.environ.get("TRANSFORMERS_TEST_DEVICE_SPEC")
    if spec:
        raise pytest.UsageError(
            f"--spyre: TRANSFORMERS_TEST_DEVICE_SPEC={spec!r} is set, and Transformers would "
            f"then take the device name from that file instead of {DEVICE!r}; unset it for "
            "--spyre runs (the spyre device needs no spec file)"
        )
    wanted: dict[str, str | None] = {
        "TRANSFORMERS_TEST_DEVICE": DEVICE,
        "TRANSFORMERS_TEST_BACKEND": BACKEND_MODULE,
    }
    if options is not None:
        wanted.update(child_environment(options))
    state = ContractState({name: os.environ.get(name) for name in wanted})
    for name, value in wanted.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return state
