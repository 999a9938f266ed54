"""head-padding 2.2.0: splits of an integer or bool tensor's stick dim below a stick (LongT5's
blocked attention mask) are computed on the host; 2.1.1 left them to stop the model at
``sub-stick-head``. Floating splits and views the release lowers are unchanged."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply

import spyre_sim
from spyre_adapters.library._stick_layout_int import IntHeadSplit, refused
from spyre_adapters.library.stick_layout_v2_1_1 import head_padding as head_padding_2_1_1
from spyre_adapters.library.stick_layout_v2_2_0 import head_padding


class BlockedMask(torch.nn.Module):
    """LongT5's ``_split_into_blocks`` of an attention mask, and an unflatten of ids."""

    def forward(self, mask: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        blocks = mask.reshape(mask.shape[0], -1, 6)
        pieces = ids.unflatten(-1, (2, 6))
        return blocks * 10 + pieces


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.tensor([[1] * 9 + [0] * 3, [1] * 12], dtype=torch.int64)
    ids = torch.arange(24, dtype=torch.int64).reshape(2, 12)
    return mask.to(device), ids.to(device)


def _run(module: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return module(*_inputs(device))


def test_same_values_and_shape_as_stock_on_the_cpu() -> None:
    expected = _run(BlockedMask())
    module = BlockedMask()
    apply(head_padding, module)
    assert torch.equal(_run(module), expected)


def test_on_the_device_2_2_0_runs_where_2_1_1_stops() -> None:
    expected = _run(BlockedMask())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = BlockedMask()
        apply(head_padding_2_1_1, stopped)
        with pytest.raises(spyre_sim.SpyreLoweringError) as err:
            _run(stopped, "spyre")
        assert err.value.gap == "sub-stick-head"
        module = BlockedMask()
        apply(head_padding, module)
        out = _run(module, "spyre").cpu()
    assert out.shape == expected.shape
    assert torch.equal(out.long(), expected)


def test_only_refused_splits_of_integer_tensors_are_taken() -> None:
    with spyre_sim.use_stack("2026.09"):
        assert refused(torch.zeros(13, 12, dtype=torch.int32), [13, 2, 6])
        assert not refused(torch.zeros(13, 64, dtype=torch.int32), [13, 2, 32])  # whole sticks
        assert not refused(torch.zeros(13, 12, dtype=torch.int32), [13, 12, 1])  # unsqueeze
        x = torch.arange(128, dtype=torch.int32).reshape(2, 64)
        with IntHeadSplit():
            kept = x.view(2, 2, 32)
            floats = torch.zeros(2, 12).view(2, 2, 6)  # floating: the placement matmul's job
        assert kept.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert floats.shape == (2, 2, 6)


def test_layout_checks_off_take_nothing() -> None:
    with spyre_sim.use_stack("2026.09"), spyre_sim.configure(layout_checks=False):
        assert not refused(torch.zeros(13, 12, dtype=torch.int32), [13, 2, 6])
