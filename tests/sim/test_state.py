"""The device's process-wide state is one object, and ``reset()`` gives a fresh process's."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

from spyre_sim import SpyreDowncastWarning, builtin_catalogue, current_stack, settings, telemetry
from spyre_sim.state import device_state


@pytest.fixture
def warned() -> Iterator[None]:
    """The once-per-process warnings given so far, given back afterwards (as in one process)."""
    kept = (
        set(device_state.warned_dtypes),
        set(device_state.warned_fallbacks),
        set(device_state.warned_resolutions),
    )
    yield
    device_state.warned_dtypes.update(kept[0])
    device_state.warned_fallbacks.update(kept[1])
    device_state.warned_resolutions.update(kept[2])


@pytest.mark.usefixtures("warned")
def test_reset_restores_a_fresh_process(spyre: ModuleType) -> None:
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    spyre.use_stack("2026.05")
    settings.numerics = False
    with spyre.model_scope():
        _ = x + x
        generation = spyre.stack_generation()
        device_state.reset()
        assert device_state.scope_depth == 0  # an interrupted block is left
    assert device_state.scope_depth == 0  # leaving the block does not take it below zero
    with spyre.model_scope():
        assert device_state.scope_depth == 1
    assert spyre.stack_generation() == generation + 1  # decision caches see the change
    assert current_stack() is builtin_catalogue().newest
    assert (settings.numerics, settings.layout_checks, settings.judge_harness) == (True,) * 3
    assert telemetry.snapshot() == telemetry.Snapshot()
    assert device_state.module_stack == []


@pytest.mark.usefixtures("warned")
def test_forget_warnings_gives_the_once_per_process_warnings_again(spyre: ModuleType) -> None:
    device_state.forget_warnings()
    with pytest.warns(SpyreDowncastWarning):
        torch.tensor([0.5]).to("spyre")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.tensor([0.5]).to("spyre")  # warned once
    device_state.forget_warnings()
    with pytest.warns(SpyreDowncastWarning):
        torch.tensor([0.5]).to("spyre")


def test_device_tensors_report_the_registered_device(spyre: ModuleType) -> None:
    assert device_state.device == torch.device("spyre", 0)
    assert torch.ones(1, device="spyre").device == device_state.device
