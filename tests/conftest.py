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


@pytest.fixture(autouse=True)
def _release_and_switches_restored() -> Iterator[None]:
    """Each test starts at the release and switches the one before it started with: a test
    that activates a release without a ``with`` block (``spyre_sim.use_stack(R)`` on its own
    line, an in-process ``--spyre`` run) must not change what the next test in the same
    process runs at."""
    from spyre_sim.state import device_state

    release = device_state.release
    switches = (
        device_state.settings.numerics,
        device_state.settings.layout_checks,
        device_state.settings.judge_harness,
    )
    yield
    if device_state.release is not release:
        with device_state.stack_lock:
            device_state.release = release
            device_state.stack_generation += 1
    settings = device_state.settings
    if (settings.numerics, settings.layout_checks, settings.judge_harness) != switches:
        settings.numerics, settings.layout_checks, settings.judge_harness = switches
