"""head-padding 2.4.0: writes through a subscript whose last entry cuts a stick dim below a
stick and whose other entries index other dims (Pixtral's block-diagonal mask
``mask[start:end, start:end] = 0``, PatchTSMixer's ``mask[b1:b2, :, -n:] = 1``) are written
into the view ``x[head, :]`` with a column mask; 2.3.0 left them to stop the model at
``sub-stick-head``. Other writes are unchanged."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact

import spyre_sim
from spyre_adapters.library.stick_layout_v2_3_0 import head_padding as head_padding_2_3_0
from spyre_adapters.library.stick_layout_v2_4_0 import head_padding


class BlockMasks(torch.nn.Module):
    """A block-diagonal mask with tensor bounds, a masked tail of patches with a scalar, a
    write of a tensor value through an index with ``None`` and an integer, and an augmented
    assignment through such an index."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]
        mask = torch.full((seq, seq), -1000.0, dtype=x.dtype, device=x.device)
        ends = torch.tensor([7, 13]).cumsum(-1)
        starts = torch.tensor([0, 7]).cumsum(-1)
        for start, end in zip(starts, ends, strict=True):
            mask[start:end, start:end] = 0
        scores = (x @ x.transpose(-1, -2)) + mask
        tail = torch.zeros(x.shape[0], 3, 4, dtype=x.dtype, device=x.device)
        tail[1:, :, -2:] = 1
        tail[0, None, :, 1:3] = x[0, :3, :2][None]
        tail[1:, 0, 0:2] += 0.5  # a read through the cut, then a write back through it
        return torch.cat([(scores.softmax(-1) @ x).flatten(), tail.flatten()])


def _inputs(device: str = "cpu") -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 20, 8, generator=generator).to(device)


def _run(module: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return module(_inputs(device))


def test_same_values_and_shape_as_stock_on_the_cpu() -> None:
    expected = _run(BlockMasks())
    module = BlockMasks()
    apply(head_padding, module)
    assert torch.equal(_run(module), expected)


def test_on_the_device_2_4_0_runs_where_2_3_0_stops() -> None:
    expected = _run(BlockMasks())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = BlockMasks()
        apply(head_padding_2_3_0, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            _run(stopped, "spyre")
        assert err.value.gap == "sub-stick-head"
        module = BlockMasks()
        apply(head_padding, module)
        out = _run(module, "spyre").cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)  # DL16 storage


def test_rollback_is_exact() -> None:
    inputs = _inputs()
    assert_rollback_exact(head_padding, BlockMasks(), lambda m: m(inputs))
