"""head-padding 2.5.0: a view that splits the stick dim below a stick and takes its shape from
the elements of an integer tensor (OneFormer's pixel decoder,
``view(bs, -1, spatial_shapes[i][0], spatial_shapes[i][1])``) is rewritten like one given
integers; 2.4.0 left it to stop the model at ``sub-stick-head``."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact

import spyre_sim
from spyre_adapters.library._stick_layout_sizes import integer_sizes
from spyre_adapters.library.stick_layout_v2_4_0 import head_padding as head_padding_2_4_0
from spyre_adapters.library.stick_layout_v2_5_0 import head_padding


class FeatureMaps(torch.nn.Module):
    """Flattened feature maps back to ``[b, c, h, w]``, sizes read from a shapes tensor, with
    ``view``, ``reshape`` (one list) and ``unflatten``."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(16))

    def forward(self, z: torch.Tensor, shapes: torch.Tensor) -> torch.Tensor:
        z = (z * self.scale).transpose(1, 2)  # [b, c, h * w]
        h, w = shapes[0][0], shapes[0][1]
        a = z.view(z.shape[0], -1, h, w)
        b = z.reshape([z.shape[0], z.shape[1], h, w])
        c = z.unflatten(2, (h, w))
        return torch.cat([a.flatten(1), (b * 2).flatten(1), (c - 1).flatten(1)], dim=-1)


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(2, 48, 16, generator=generator)  # 48 positions: a 6 x 8 map
    return z.to(device), torch.tensor([[6, 8]]).to(device)


def _run(module: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return module(*_inputs(device))


def test_same_values_and_shape_as_stock_on_the_cpu() -> None:
    torch.manual_seed(0)
    stock = FeatureMaps()
    torch.manual_seed(0)
    module = FeatureMaps()
    apply(head_padding, module)
    expected = _run(stock)
    assert torch.equal(_run(module), expected)


def test_on_the_device_2_5_0_runs_where_2_4_0_stops() -> None:
    torch.manual_seed(0)
    stock = FeatureMaps()
    expected = _run(stock)
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = FeatureMaps()
        stopped.load_state_dict(stock.state_dict())
        apply(head_padding_2_4_0, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            _run(stopped.to("spyre"), "spyre")
        assert err.value.gap == "sub-stick-head"
        module = FeatureMaps()
        module.load_state_dict(stock.state_dict())
        apply(head_padding, module)
        out = _run(module.to("spyre"), "spyre").cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)  # DL16 storage


def test_only_shapes_holding_integer_tensors_are_read() -> None:
    x = torch.zeros(2, 48)
    six, eight = torch.tensor(6), torch.tensor(8)
    read = integer_sizes(torch.Tensor.view, (x, 2, six, eight), {})
    assert read is not None
    assert read[1:] == (2, 6, 8)
    assert all(type(v) is int for v in read[1:])
    assert integer_sizes(torch.Tensor.reshape, (x, [2, six, 8]), {}) == (x, (2, 6, 8))
    assert integer_sizes(torch.unflatten, (x, 1, (six, eight)), {}) == (x, 1, (6, 8))
    assert integer_sizes(torch.Tensor.view, (x, 2, 6, 8), {}) is None  # integers already
    assert integer_sizes(torch.Tensor.view, (x, torch.float16), {}) is None  # a dtype view
    assert integer_sizes(torch.Tensor.view, (x, 2, torch.tensor(6.0), 8), {}) is None
    assert integer_sizes(torch.Tensor.add, (x, six), {}) is None


def test_rollback_is_exact() -> None:
    inputs = _inputs()
    assert_rollback_exact(head_padding, FeatureMaps(), lambda m: m(*inputs))
