"""``unfolded-gru-cell``: ``nn.GRUCell`` computed from ordinary torch calls where the other
adapters see them.

CPU: for bare cells (odd sizes, no bias, given or zero state, unbatched input) the adapted
cell returns the stock state within float32 rounding, with the stock shape and state dict, and
rolls back exactly; a wrong gate order would be caught; it reads its weights at call time.
Device: a cell of input 17 and hidden 16 (SLANet's) stops at its matmul (gap ``stick-align``;
with the layout checks off at ``_thnn_fused_gru_cell``) without the adapter, and matches the
CPU with it. Declines: models without a GRU cell, subclasses with their own forward."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, manifest, registry_without
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.unfolded_gru_cell import adapter, gru_cell, unfoldable

ATOL = 1e-6  # float32 rounding: PyTorch's cell updates its gates in place as strided views

SIZES = [(17, 16, True), (32, 48, True), (7, 5, False), (64, 64, True)]


def cell(input_size: int, hidden_size: int, bias: bool = True, seed: int = 0) -> nn.GRUCell:
    torch.manual_seed(seed)
    made = nn.GRUCell(input_size, hidden_size, bias=bias)
    with torch.no_grad():
        for p in made.parameters():
            p.mul_(4.0)  # large enough that every gate saturates somewhere
    return made


class Decoder(nn.Module):
    """Three steps of a GRU cell feeding its state back, as an attention decoder runs it."""

    def __init__(self, input_size: int = 17, hidden_size: int = 16) -> None:
        super().__init__()
        self.rnn = cell(input_size, hidden_size)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        states = []
        for t in range(x.shape[1]):
            h = self.rnn(x[:, t], h)
            states.append(h)
        return torch.stack(states, 1)


def _inputs(input_size: int, hidden_size: int, batch: int = 3) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (
        torch.randn(batch, input_size, generator=generator),
        torch.randn(batch, hidden_size, generator=generator),
    )


@pytest.mark.parametrize(("input_size", "hidden_size", "bias"), SIZES)
@pytest.mark.parametrize("state", [True, False])
def test_same_state_as_stock(input_size: int, hidden_size: int, bias: bool, state: bool) -> None:
    stock = cell(input_size, hidden_size, bias)
    model = nn.Sequential(cell(input_size, hidden_size, bias))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    apply(adapter, model)
    x, h = _inputs(input_size, hidden_size)
    with torch.no_grad():
        want = stock(x, h) if state else stock(x)
        got = model[0](x, h) if state else model[0](x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL)
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == shapes


def test_unbatched_input_is_the_same() -> None:
    stock, model = cell(7, 5), nn.Sequential(cell(7, 5))
    apply(adapter, model)
    x, h = _inputs(7, 5, batch=1)
    with torch.no_grad():
        torch.testing.assert_close(model[0](x[0], h[0]), stock(x[0], h[0]), rtol=0, atol=ATOL)
        assert model[0](x[0]).shape == (5,)


def test_a_wrong_gate_order_would_be_caught() -> None:
    made = cell(7, 5)
    x, h = _inputs(7, 5)
    w_ih = made.weight_ih
    swapped = torch.cat([w_ih[5:10], w_ih[:5], w_ih[10:]])  # reset and update exchanged
    with torch.no_grad():
        right = gru_cell(x, h, w_ih, made.weight_hh, made.bias_ih, made.bias_hh)
        wrong = gru_cell(x, h, swapped, made.weight_hh, made.bias_ih, made.bias_hh)
        torch.testing.assert_close(right, made(x, h), rtol=0, atol=ATOL)
    assert (right - wrong).abs().max() > 1e-2


def test_weights_are_read_at_call_time() -> None:
    model = nn.Sequential(cell(7, 5))
    apply(adapter, model)
    x, h = _inputs(7, 5)
    other = cell(7, 5, seed=3)
    model.load_state_dict({f"0.{k}": v for k, v in other.state_dict().items()})
    with torch.no_grad():
        torch.testing.assert_close(model[0](x, h), other(x, h), rtol=0, atol=ATOL)


def test_rollback_is_exact() -> None:
    x, h = _inputs(17, 16, batch=2)
    sequence = torch.stack([x, x * 0.5, -x], 1)
    assert_rollback_exact(adapter, Decoder(), lambda m: m(sequence, h))


def test_declines_models_without_a_stock_gru_cell() -> None:
    assert not adapter.matches(nn.Sequential(nn.Linear(3, 3), nn.GRU(3, 3)))

    class OwnForward(nn.GRUCell):
        def forward(self, input: torch.Tensor, hx: Any = None) -> torch.Tensor:
            return super().forward(input, hx)

    assert not unfoldable(OwnForward(3, 3))
    with pytest.raises(ValueError, match="unfolded-gru-cell does not apply"):
        apply(adapter, nn.Sequential(nn.Linear(3, 3)))


def test_manifest() -> None:
    data = manifest("unfolded-gru-cell", "1.0.0")
    assert data["kind"] == "permanent"
    assert data["gaps"] == ["stick-align"]
    assert data["order"] < manifest("stick-align-padding")["order"]


# --- the device ---------------------------------------------------------------------------------


def _sequence() -> tuple[torch.Tensor, torch.Tensor]:
    x, h = _inputs(17, 16, batch=2)
    return torch.stack([x, x * 0.5, -x], 1), h


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
def test_the_decoder_runs_on_the_device_where_the_stock_cell_fails() -> None:
    stock = Decoder().eval()
    x, h = _sequence()
    with torch.no_grad():
        ref = stock(x, h)
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        with pytest.raises(spyre_sim.SpyreLoweringError, match="stick-align"):
            plain.to("spyre")(x.to("spyre"), h.to("spyre"))
        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        assert "unfolded-gru-cell" in {a.name for a in spyre_adapters.applied(adapted)}
        out = adapted.to("spyre")(x.to("spyre"), h.to("spyre")).cpu().float()
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=0, atol=2e-2)  # DL16 storage


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
def test_functional_mode_no_longer_meets_the_fused_cell() -> None:
    stock = Decoder().eval()
    x, h = _sequence()
    with torch.no_grad():
        ref = stock(x, h)
    with (
        spyre_sim.use_stack("2026.09"),
        spyre_sim.configure(layout_checks=False, numerics=False),
        torch.no_grad(),
    ):
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        with pytest.raises(spyre_sim.SpyreLoweringError, match="_thnn_fused_gru_cell"):
            plain.to("spyre")(x.to("spyre"), h.to("spyre"))
        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        out = adapted.to("spyre")(x.to("spyre"), h.to("spyre")).cpu()
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
