"""einsum-pieces 1.1.0: 1.0's pieces, also for an einsum behind a decorated forward (SAM 3's
mask decoder: ``capture_outputs`` around a forward computing ``einsum("bqc,bchw->bqhw")`` over
a 32 x 32 map), bound with the shared mode-scoped forward. 1.0 does not see that forward and
the device stops at ``sub-stick-head``; 1.1 runs it and matches the CPU. On the CPU the
adapted model is the stock one (values to rounding, state dict, config), a model without
einsum is not matched, rollback is exact."""

from __future__ import annotations

import torch
from library_models import assert_stops_then_runs, decorated
from test_einsum_pieces import (
    assert_adapted_is_stock,
    assert_exact_rollback,
    assert_not_matched_without_einsum,
    assert_xlnet_is_stock,
)
from torch import nn

from spyre_adapters.library.einsum_pieces import adapter as v1_0
from spyre_adapters.library.einsum_pieces_v1_1_0 import adapter
from spyre_adapters.library.stick_layout_v2_5_0 import head_padding


class MaskDecoder(nn.Module):
    """SAM 3's mask prediction: query embeddings against a per-pixel map, decorated forward."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(64, 64)

    @decorated
    def forward(self, queries: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bqc,bchw->bqhw", self.embed(queries), pixels)


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(2, 5, 64, generator=generator)
    pixels = torch.randn(2, 64, 32, 32, generator=generator)  # a 32 x 32 map: 1024 wide
    return queries.to(device), pixels.to(device)


def _decoder() -> MaskDecoder:
    torch.manual_seed(0)
    return MaskDecoder().eval()


def test_a_decorated_forward_is_matched_by_1_1_only() -> None:
    assert not v1_0.matches(_decoder())
    assert adapter.matches(_decoder())


def test_on_the_device_the_decorated_mask_decoder_runs_only_with_1_1() -> None:
    assert_stops_then_runs(_decoder, _inputs, [head_padding], [head_padding, adapter])


def test_the_adapted_decoder_is_the_stock_one_on_the_cpu() -> None:
    assert_adapted_is_stock(adapter, _decoder, _inputs)


def test_xlnet_is_the_stock_model_on_the_cpu() -> None:
    assert_xlnet_is_stock(adapter)


def test_a_model_without_einsum_is_not_matched() -> None:
    assert_not_matched_without_einsum(adapter)


def test_rollback_is_exact() -> None:
    assert_exact_rollback(adapter, _decoder(), inputs=_inputs)
