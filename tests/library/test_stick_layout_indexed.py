"""head-padding 2.3.0: cuts of a stick dim below a stick that come with other indices in one
subscript (RT-DETR's ``reference_points[:, :, None, :, None, :2]``, YOLOS's
``boxes[:, None, :2]``) are computed as a selection matmul and then the rest of the index;
2.2.0 left them to stop the model at ``sub-stick-head``. Other indices are unchanged."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact

import spyre_sim
from spyre_adapters.library._stick_layout_indexed import split_index
from spyre_adapters.library.stick_layout_v2_2_0 import head_padding as head_padding_2_2_0
from spyre_adapters.library.stick_layout_v2_3_0 import head_padding


class Boxes(torch.nn.Module):
    """Deformable attention's sampling locations and a matcher's pairwise centre distance."""

    def forward(self, reference: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        centre = reference[:, :, None, :, None, :2]
        size = reference[:, :, None, :, None, 2:]
        locations = centre + offsets * size * 0.5
        boxes = reference[0, :, 0]  # [queries, 4]
        distance = (boxes[:, None, :2] - boxes[None, :, :2]).abs().sum(-1)
        return locations.flatten(1).sum(-1, keepdim=True) + distance.sum()


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    reference = torch.rand(2, 30, 3, 4, generator=generator)
    offsets = torch.randn(2, 30, 4, 3, 2, 2, generator=generator)
    return reference.to(device), offsets.to(device)


def _run(module: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return module(*_inputs(device))


def test_same_values_and_shape_as_stock_on_the_cpu() -> None:
    expected = _run(Boxes())
    module = Boxes()
    apply(head_padding, module)
    assert torch.equal(_run(module), expected)


def test_on_the_device_2_3_0_runs_where_2_2_0_stops() -> None:
    expected = _run(Boxes())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = Boxes()
        apply(head_padding_2_2_0, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            _run(stopped, "spyre")
        assert err.value.gap == "sub-stick-head"
        module = Boxes()
        apply(head_padding, module)
        out = _run(module, "spyre").cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)  # DL16 storage


@pytest.mark.parametrize(
    ("shape", "index", "parts"),
    [
        ((5, 4), (slice(None), None, slice(0, 2)), ((slice(None), None), (0, 2))),
        ((5, 3, 4), (Ellipsis, None, slice(2, None)), ((Ellipsis, None), (2, 2))),
        ((5, 3, 4), (0, slice(None), slice(1, 3)), ((0, slice(None)), (1, 2))),
    ],
)
def test_an_index_is_taken_apart_where_its_last_entry_cuts_the_last_dim(
    shape: tuple[int, ...], index: tuple[object, ...], parts: object
) -> None:
    assert split_index(torch.zeros(shape), index) == parts


@pytest.mark.parametrize(
    "index",
    [
        (Ellipsis, slice(0, 2)),  # the floating rewrite's own case
        (slice(None), slice(None), slice(0, 2)),  # likewise
        (slice(None), slice(0, 2)),  # the last entry is dim 1 of 3, not the stick dim
        (torch.tensor([0, 1]), slice(0, 2)),  # advanced indexing: left alone
        (slice(None), None, slice(None)),  # no cut
        (slice(None), None, slice(0, 4, 2)),  # a strided cut
    ],
)
def test_other_indices_are_left_alone(index: tuple[object, ...]) -> None:
    assert split_index(torch.zeros(5, 3, 4), index) is None


def test_rollback_is_exact() -> None:
    inputs = _inputs()
    assert_rollback_exact(head_padding, Boxes(), lambda m: m(*inputs))
