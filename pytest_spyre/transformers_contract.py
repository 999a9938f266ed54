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

The previous values are restored when the run ends (:meth:`ContractState.leave`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

__all__ = ["BACKEND_MODULE", "DEVICE", "ContractState", "enter_contract"]

DEVICE = "spyre"
BACKEND_MODULE = "spyre_sim"
_VARIABLES = ("TRANSFORMERS_TEST_DEVICE", "TRANSFORMERS_TEST_BACKEND")


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


def enter_contract() -> ContractState:
    """Register the device and point the Transformers test-device variables at it."""
    import spyre_sim

    spyre_sim.register()
    spec = os.environ.get("TRANSFORMERS_TEST_DEVICE_SPEC")
    if spec:
        raise pytest.UsageError(
            f"--spyre: TRANSFORMERS_TEST_DEVICE_SPEC={spec!r} is set, and Transformers would "
            f"then take the device name from that file instead of {DEVICE!r}; unset it for "
            "--spyre runs (the spyre device needs no spec file)"
        )
    state = ContractState({name: os.environ.get(name) for name in _VARIABLES})
    os.environ["TRANSFORMERS_TEST_DEVICE"] = DEVICE
    os.environ["TRANSFORMERS_TEST_BACKEND"] = BACKEND_MODULE
    return state
