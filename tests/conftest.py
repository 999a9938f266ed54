"""Shared fixtures for tests that run on the emulated ``spyre`` device."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

# ``import spyre_sim`` no longer imports torch. pytester's in-process runs remove the modules
# first imported inside them, and torch's C extension cannot be imported twice in a process:
# load it here, in the outer process, before any such run.
import torch  # noqa: F401

# tests/data holds inputs of the tests (a model test tree among them), not tests of this project
collect_ignore_glob = ["data/*"]


@pytest.fixture
def spyre() -> Iterator[ModuleType]:
    """``spyre_sim`` with the device registered, fresh telemetry, the newest built-in release
    and default settings; everything restored afterwards."""
    import spyre_sim
    from spyre_sim.state import device_state

    spyre_sim.telemetry.reset()
    device_state.module_stack.clear()
    newest = spyre_sim.builtin_catalogue().newest.name
    with spyre_sim.use_stack(newest), spyre_sim.configure(numerics=True, layout_checks=True):
        yield spyre_sim
    device_state.module_stack.clear()
    spyre_sim.telemetry.reset()
