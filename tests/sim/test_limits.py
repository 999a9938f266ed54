"""Which device values an emulator limit may have reached (``spyre_sim.limits``): from the
first limit met after a reset on, the device notes the storages it writes; values it computed
before and did not write since cannot hold the limit's consequence."""

from __future__ import annotations

import copy
from types import ModuleType

import pytest
import torch

STACK = "2026.09"


def _beyond_fp16(spyre: ModuleType) -> torch.Tensor:
    """A device tensor holding 89984 (300**2 in DL16): beyond what fp16 host tensors hold."""
    with spyre.use_stack(STACK), torch.no_grad():
        return torch.full((2, 64), 300.0, dtype=torch.float16).to("spyre") ** 2


def test_nothing_is_tracked_until_a_limit_is_met(spyre: ModuleType) -> None:
    spyre.limits.reset()
    with spyre.use_stack(STACK), torch.no_grad():
        a = torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3
    assert spyre.limits.reached([a]) is None
    assert not spyre.limits.tracking()


def test_values_made_before_the_first_limit_are_not_reached(spyre: ModuleType) -> None:
    big = _beyond_fp16(spyre)
    spyre.limits.reset()
    with spyre.use_stack(STACK), torch.no_grad(), spyre.telemetry.record() as run:
        before = torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3
        view_before = before[0]
        big.cpu()  # read in fp16: the limit
        assert spyre.limits.tracking()
        after = torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3
        view_after = before[1]  # a view taken after the limit writes nothing
        # a transfer after it is a write, and so is a deep copy
        moved_in = torch.ones(2, 64, dtype=torch.float16).to("spyre")
        made = spyre.SpyreTensor(torch.ones(2, 64, dtype=torch.float16))
        copied = copy.deepcopy(before)
    assert run.snapshot.to_json()["emulator_limits"]["fp16-range"]["count"] == 1
    assert spyre.limits.reached([before]) is False
    assert spyre.limits.reached([view_before, view_after]) is False
    assert spyre.limits.reached([after]) is True
    assert spyre.limits.reached([moved_in]) is True
    assert spyre.limits.reached([made]) is True
    assert spyre.limits.reached([copied]) is True
    assert spyre.limits.reached([before, after]) is True
    assert spyre.limits.reached([before.cpu()]) is True  # a host value: nothing says whence


def test_a_write_after_the_limit_reaches_the_tensor_and_its_views(spyre: ModuleType) -> None:
    big = _beyond_fp16(spyre)
    spyre.limits.reset()
    with spyre.use_stack(STACK), torch.no_grad():
        before = torch.ones(4, 64, dtype=torch.float16).to("spyre") * 3
        row = before[3]
        big.cpu()
        before[:2].add_(1.0)  # written through another view
    assert spyre.limits.reached([row]) is True
    assert spyre.limits.reached([before]) is True


def test_reset_forgets(spyre: ModuleType) -> None:
    big = _beyond_fp16(spyre)
    with spyre.use_stack(STACK), torch.no_grad():
        big.cpu()
        after = torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3
    assert spyre.limits.reached([after]) is True
    spyre.limits.reset()
    assert spyre.limits.reached([after]) is None


def test_beyond_the_most_it_notes_every_value_counts_as_reached(
    spyre: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spyre.limits, "MOST_NOTED", 3)
    big = _beyond_fp16(spyre)
    spyre.limits.reset()
    with spyre.use_stack(STACK), torch.no_grad():
        before = torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3
        big.cpu()
        assert spyre.limits.reached([before]) is False
        kept = [torch.ones(2, 64, dtype=torch.float16).to("spyre") * 3 for _ in range(4)]
        assert len(kept) == 4  # alive: four storages more than it notes
    assert spyre.limits.reached([before]) is True
    spyre.limits.reset()
    assert spyre.limits.reached([before]) is None
