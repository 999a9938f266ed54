"""Shared fixtures for tests that run on the emulated ``spyre`` device."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from types import ModuleType

import pytest

# ``import spyre_sim`` no longer imports torch. pytester's in-process runs remove the modules
# first imported inside them, and torch's C extension cannot be imported twice in a process:
# load it here, in the outer process, before any such run.
import torch

# for the same reason, torch._dynamo (Transformers' testing_utils imports it, so an in-process
# ``--spyre`` run may be the first to): it imports torch._inductor.test_operators, which
# registers a TORCH_LIBRARY namespace that cannot be registered a second time when a later
# test imports torch._dynamo again
import torch._dynamo

# the user's parse cache (spyre_adapters._user_cache) of the suite and of the processes it starts
# lives in a folder of its own, never in the user's ~/.cache
os.environ.setdefault("SPYRE_ADAPTERS_CACHE_DIR", tempfile.mkdtemp(prefix="spyre-adapters-cache-"))

# the device's reproductions are tested as each release has them: a user's HBM_POOL_PLANNING=0
# (the workaround of the 2026.08 mem-pool regression) would turn one off for the whole suite;
# the tests that want it set it in the processes they start
os.environ.pop("HBM_POOL_PLANNING", None)

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


@pytest.fixture(autouse=True)
def _no_mode_left_active() -> Iterator[None]:
    """A test must not leave a dispatch or function mode entered (a scoped mode of an adapter
    whose forward raised half-way): the modes left behind are popped, so the next test in the
    process runs without them."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode

    dispatch = len(_get_current_dispatch_mode_stack())
    function = torch._C._len_torch_function_stack()
    yield
    while len(_get_current_dispatch_mode_stack()) > dispatch:
        _pop_mode()
    while torch._C._len_torch_function_stack() > function:
        torch._C._pop_torch_function_stack()
