"""``rotate-half-matmul``: ``rotate_half`` as ``x @ P``, ``P`` measured from the family's own.

CPU: the measured ``P`` reproduces ``rotate_half`` exactly at every width, other functions are
refused; DiffusionGemma (Gemma 4's attention, which ``rope-rotation`` declines) is the stock
model bit for bit with it, and rolls back exactly. Device: a Gemma-4-style attention
(``apply_rotary_pos_emb(x, cos, sin)``) reproduces the ``rotate-half`` miscompile at 2026.09
without the adapter and matches the CPU with none reproduced with it. Declines: no RoPE,
models ``rope-rotation`` adapted already."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, causal_lm, decorated
from torch import nn

import spyre_sim
from spyre_adapters.library.rope_v1_1_0 import adapter as rope_rotation
from spyre_adapters.library.rotate_half_matmul import adapter, signed_permutation

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.SpyreSimWarning")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """The stock form: slice the head in halves, negate the second, concatenate."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> torch.Tensor:
    """Gemma 4's single-tensor form."""
    return (x * cos.unsqueeze(unsqueeze_dim)) + (rotate_half(x) * sin.unsqueeze(unsqueeze_dim))


@pytest.mark.parametrize("width", [2, 8, 16, 64, 256])
def test_the_measured_permutation_is_rotate_half_exactly(width: int) -> None:
    matrix = signed_permutation(rotate_half, width)
    assert matrix is not None
    x = torch.randn(4, 3, width)
    assert torch.equal(x @ matrix, rotate_half(x))


@pytest.mark.parametrize(
    "function",
    [
        lambda x: x * 2,  # not a permutation
        lambda x: torch.flip(x, dims=[-1]) + 1,  # not linear
        lambda x: x[..., :2],  # another shape
    ],
)
def test_other_functions_are_refused(function: Callable[[torch.Tensor], Any]) -> None:
    assert signed_permutation(function, 8) is None


class Attention(nn.Module):
    """Gemma 4's rotary step: a projection split into heads of ``head_dim``, each rotated."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.proj = nn.Linear(128, 256)

    @decorated
    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        heads = self.proj(x).view(x.shape[0], x.shape[1], -1, self.head_dim)
        return apply_rotary_pos_emb(heads, cos, sin, unsqueeze_dim=2)


def _inputs(head_dim: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 128, generator=generator)
    angles = torch.randn(2, 5, head_dim, generator=generator)
    return x, angles.cos(), angles.sin()


def _attention(head_dim: int = 128) -> Attention:
    torch.manual_seed(0)
    return Attention(head_dim).eval()


def test_the_adapted_attention_is_the_stock_one_on_the_cpu() -> None:
    stock, model = _attention(), _attention()
    edit = apply(adapter, model)
    assert len(edit) == 1
    assert not adapter.matches(model), "an adapted model must not match again"
    with torch.no_grad():
        assert torch.equal(model(*_inputs(128)), stock(*_inputs(128)))
    assert rotate_half is globals()["rotate_half"]  # the module's own globals are untouched


def test_on_the_device_the_miscompile_is_gone_with_it() -> None:
    with torch.no_grad():
        expected = _attention()(*_inputs(128))
        with spyre_sim.use_stack("2026.09"):
            with spyre_sim.telemetry.record() as plain_run:
                plain = _attention().to("spyre")
                plain(*(t.to("spyre") for t in _inputs(128)))
            assert "rotate-half" in plain_run.snapshot.to_json()["miscompiles"]
            model = _attention()
            apply(adapter, model)
            with spyre_sim.telemetry.record() as adapted_run:
                out = model.to("spyre")(*(t.to("spyre") for t in _inputs(128)))
            assert "rotate-half" not in adapted_run.snapshot.to_json()["miscompiles"]
    torch.testing.assert_close(out.cpu().float(), expected, rtol=1e-2, atol=1e-2)


def test_diffusion_gemma_is_the_stock_model_on_the_cpu() -> None:
    from transformers import DiffusionGemmaConfig, DiffusionGemmaModel

    config = DiffusionGemmaConfig(
        text_config={
            "vocab_size": 99,
            "hidden_size": 32,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                },
            },
            "num_experts": 4,
            "top_k_experts": 2,
            "moe_intermediate_size": 8,
            "moe_num_shared_experts": 1,
            "per_layer_config": {"1": {"head_dim": 16}},
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 37,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "patch_size": 5,
            "image_size": 20,
        },
        canvas_length=4,
        mm_tokens_per_image=2,
        self_conditioning_size=16,
    )
    torch.manual_seed(0)
    stock = DiffusionGemmaModel(config).eval()
    model = copy.deepcopy(stock)
    assert not rope_rotation.matches(model)  # why this adapter exists
    assert adapter.matches(model)
    ids = torch.tensor([[5, 17, 42, 7, 3]])
    canvas = torch.tensor([[8, 9, 10, 11]])

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(input_ids=ids, decoder_input_ids=canvas).last_hidden_state  # type: ignore[no-any-return]

    reference = probe(stock)
    edit = apply(adapter, model)
    assert torch.equal(probe(model), reference)
    assert model.state_dict().keys() == stock.state_dict().keys()
    edit.rollback()
    assert torch.equal(probe(model), reference)
    assert_rollback_exact(adapter, copy.deepcopy(stock), probe)


def test_declines() -> None:
    assert not adapter.matches(nn.Sequential(nn.Linear(4, 4)))
    neox = causal_lm("gpt_neox")
    assert adapter.matches(neox)  # the stock rotate_half: it would serve
    apply(rope_rotation, neox)
    assert not adapter.matches(neox)  # rope-rotation's rotation has no rotate_half left
