"""einsum-pieces 1.0.0: two-operand ``torch.einsum`` computed as the sum, permutes, reshapes
and matmul of ATen's own contraction, at the level the other rewrites see, so the view that
splits a merged group back into dims narrower than a stick (MaskFormer's
``einsum("bqc,bchw->bqhw")`` over a 48-wide map) is computed by ``head-padding`` instead of
stopping the model at ``sub-stick-head``."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact
from torch import nn

import spyre_sim
from spyre_adapters.library.einsum_pieces import EinsumPieces, adapter, contract, parse
from spyre_adapters.library.stick_layout_v2_5_0 import head_padding

# (equation, shape of x, shape of y): projections, attention scores and values, outer and
# inner products, letters summed alone, a broadcast batch dim, outputs in another order
EQUATIONS = [
    ("bqc,bchw->bqhw", (2, 10, 8), (2, 8, 6, 5)),
    ("ibnd,jbnd->bnij", (7, 2, 4, 8), (9, 2, 4, 8)),
    ("bnij,jbnd->ibnd", (2, 4, 7, 9), (9, 2, 4, 8)),
    ("ibh,hnd->ibnd", (7, 2, 32), (32, 4, 8)),
    ("ibnd,hnd->ibh", (7, 2, 4, 8), (32, 4, 8)),
    ("ij,j->i", (3, 4), (4,)),
    ("i,i->", (4,), (4,)),
    ("abc,cd->abd", (2, 3, 4), (4, 5)),
    ("bhqd,bhkd->bhqk", (2, 3, 5, 8), (2, 1, 6, 8)),
    ("xyz,zy->x", (2, 3, 4), (4, 3)),
    ("nm,mk->kn", (3, 4), (4, 5)),
    ("b n d , m d -> b n m", (2, 3, 4), (5, 4)),
]


def _operands(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(len(x_shape) * 10 + len(y_shape))
    return tuple(
        torch.randn(*shape, generator=generator, dtype=torch.float64)
        for shape in (x_shape, y_shape)
    )


@pytest.mark.parametrize(("equation", "x_shape", "y_shape"), EQUATIONS)
def test_the_pieces_are_einsum_in_float64(
    equation: str, x_shape: tuple[int, ...], y_shape: tuple[int, ...]
) -> None:
    x, y = _operands(x_shape, y_shape)
    expected = torch.einsum(equation, x, y)
    got = contract(equation, x, y)
    assert got is not None
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    with EinsumPieces():
        listed = torch.einsum(equation, [x, y])  # operands given as one list
    torch.testing.assert_close(listed, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "equation",
    [
        "ij,jk",  # implicit output
        "...ij,...jk->...ik",  # ellipsis
        "ii,ij->ij",  # a letter twice in one operand
        "ij,jk->iki",  # a letter twice in the output
        "ij,jk,kl->il",  # three operands
        "ijk,jk->i",  # a rank that does not fit
    ],
)
def test_other_equations_are_left_to_einsum(equation: str) -> None:
    assert parse(equation, (2, 2)) is None


def test_products_without_a_sum_are_left_to_einsum() -> None:
    x, y = torch.randn(3, 4), torch.randn(3, 5)
    assert contract("bi,bj->bij", x, y) is None  # rotary tables: t outer inv_freq
    assert contract("i,j->ij", x[0], y[0]) is None


def test_a_broadcast_contraction_is_left_to_einsum() -> None:
    x, y = torch.randn(3, 1), torch.randn(4, 5)  # j is 1 in x and 4 in y
    assert contract("ij,jk->ik", x, y) is None
    with EinsumPieces():
        got = torch.einsum("ij,jk->ik", x, y)
    torch.testing.assert_close(got, torch.einsum("ij,jk->ik", x, y))


class MaskLogits(nn.Module):
    """MaskFormer's mask logits: per-query mask embeddings against a per-pixel embedding map."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(64))

    def forward(self, masks: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bqc,bchw->bqhw", masks * self.scale, pixels)


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    masks = torch.randn(2, 10, 64, generator=generator)
    pixels = torch.randn(2, 64, 6, 8, generator=generator)  # a 48-wide map: below a stick
    return masks.to(device), pixels.to(device)


def test_on_the_device_the_mask_logits_run_only_with_it() -> None:
    torch.manual_seed(0)
    stock = MaskLogits()
    with torch.no_grad():
        expected = stock(*_inputs())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = MaskLogits()
        stopped.load_state_dict(stock.state_dict())
        apply(head_padding, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            stopped.to("spyre")(*_inputs("spyre"))
        assert err.value.gap == "sub-stick-head"
        model = MaskLogits()
        model.load_state_dict(stock.state_dict())
        assert adapter.matches(model)
        apply(head_padding, model)
        apply(adapter, model)
        out = model.to("spyre")(*_inputs("spyre")).cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=0.1)  # DL16, sums of 64 terms


# -- XLNet: every attention's projections and scores are einsums ----------------------------


def xlnet(seed: int = 0) -> nn.Module:
    from transformers import XLNetConfig, XLNetLMHeadModel

    config = XLNetConfig(vocab_size=99, d_model=32, n_layer=2, n_head=4, d_inner=37)
    torch.manual_seed(seed)
    return XLNetLMHeadModel(config).eval()


IDS = torch.tensor([[5, 17, 3, 44, 8, 2, 61], [9, 9, 12, 1, 70, 33, 4]])


def _logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits  # type: ignore[no-any-return]


def assert_xlnet_is_stock(version: Any) -> None:
    """XLNet adapted by ``version`` of einsum-pieces gives the stock logits and config."""
    stock, adapted = xlnet(), xlnet()
    apply(version, adapted)
    torch.testing.assert_close(_logits(adapted), _logits(stock), rtol=1e-5, atol=1e-5)
    assert adapted.config.to_dict() == stock.config.to_dict()


def assert_adapted_is_stock(version: Any, build: Any, inputs: Any) -> None:
    """A module from ``build()`` adapted by ``version`` gives the stock values on ``inputs()``
    and keeps its state dict keys; adapted, it does not match again."""
    stock, model = build(), build()
    edit = apply(version, model)
    assert len(edit) >= 1
    assert not version.matches(model), "an adapted model must not match again"
    with torch.no_grad():
        torch.testing.assert_close(model(*inputs()), stock(*inputs()), rtol=1e-5, atol=1e-5)
    assert model.state_dict().keys() == stock.state_dict().keys()


def assert_not_matched_without_einsum(version: Any) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    assert not version.matches(model)
    with pytest.raises(ValueError, match="einsum-pieces does not apply to Sequential"):
        apply(version, model)


def assert_exact_rollback(version: Any, *decoders: nn.Module, inputs: Any) -> None:
    """Rollback of ``version`` is exact on XLNet and on each of ``decoders`` (fed
    ``inputs()``)."""
    assert_rollback_exact(version, xlnet(), _logits)

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(*inputs())  # type: ignore[no-any-return]

    for decoder in decoders:
        assert_rollback_exact(version, decoder, probe)


def test_xlnet_is_the_stock_model_on_the_cpu() -> None:
    stock, adapted = xlnet(), xlnet()
    shapes = {key: tuple(value.shape) for key, value in stock.state_dict().items()}
    assert adapter.matches(adapted)
    edit = apply(adapter, adapted)
    assert len(edit) >= 2  # at least each layer's relative attention
    assert not adapter.matches(adapted), "an adapted model must not match again"
    torch.testing.assert_close(_logits(adapted), _logits(stock), rtol=1e-5, atol=1e-5)
    assert {key: tuple(value.shape) for key, value in adapted.state_dict().items()} == shapes
    assert adapted.config.to_dict() == stock.config.to_dict()


def test_a_model_without_einsum_is_not_matched() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=99, n_embd=32, n_layer=1, n_head=4))
    assert not adapter.matches(model)
    with pytest.raises(ValueError, match="einsum-pieces does not apply to GPT2LMHeadModel"):
        apply(adapter, model)


def test_rollback_is_exact() -> None:
    assert_rollback_exact(adapter, xlnet(), _logits)
