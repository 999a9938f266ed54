"""einsum-pieces 1.1.0: 1.0's pieces, also for an einsum behind a decorated forward (SAM 3's
mask decoder: ``capture_outputs`` around a forward computing ``einsum("bqc,bchw->bqhw")`` over
a 32 x 32 map), bound with the shared mode-scoped forward. 1.0 does not see that forward and
the device stops at ``sub-stick-head``; 1.1 runs it and matches the CPU. On the CPU the
adapted model is the stock one (values to rounding, state dict, config), a model without
einsum is not matched, rollback is exact."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact, decorated
from test_einsum_pieces import _logits, xlnet
from torch import nn

import spyre_sim
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
    with torch.no_grad():
        expected = _decoder()(*_inputs())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = _decoder()
        apply(head_padding, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            stopped.to("spyre")(*_inputs("spyre"))
        assert err.value.gap == "sub-stick-head"
        model = _decoder()
        apply(head_padding, model)
        apply(adapter, model)
        out = model.to("spyre")(*_inputs("spyre")).cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=0.1)  # DL16, sums of 64 terms


def test_the_adapted_decoder_is_the_stock_one_on_the_cpu() -> None:
    stock, model = _decoder(), _decoder()
    edit = apply(adapter, model)
    assert len(edit) >= 1
    assert not adapter.matches(model), "an adapted model must not match again"
    with torch.no_grad():
        torch.testing.assert_close(model(*_inputs()), stock(*_inputs()), rtol=1e-5, atol=1e-5)
    assert model.state_dict().keys() == stock.state_dict().keys()


def test_xlnet_is_the_stock_model_on_the_cpu() -> None:
    stock, adapted = xlnet(), xlnet()
    apply(adapter, adapted)
    torch.testing.assert_close(_logits(adapted), _logits(stock), rtol=1e-5, atol=1e-5)
    assert adapted.config.to_dict() == stock.config.to_dict()


def test_a_model_without_einsum_is_not_matched() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    assert not adapter.matches(model)
    with pytest.raises(ValueError, match="einsum-pieces does not apply to Sequential"):
        apply(adapter, model)


def test_rollback_is_exact() -> None:
    assert_rollback_exact(adapter, xlnet(), _logits)

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(*_inputs())  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, _decoder(), probe)
