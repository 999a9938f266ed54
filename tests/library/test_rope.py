from __future__ import annotations

import pytest
import torch
from library_models import (
    PROMPT,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    base_model,
    causal_lm,
    families,
    prompt_logits,
    recording,
)

from spyre_adapters.library.fused_projection import adapter as fused
from spyre_adapters.library.rope import HostRotaryEmbedding, adapter

FAMILIES = families("rope-rotation")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock = causal_lm(model_type)
    adapted = causal_lm(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert any(isinstance(m, HostRotaryEmbedding) for m in adapted.modules())
    assert not adapter.matches(adapted), "an adapted model must not match again"
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("model_type", ["llama", "phi", "gpt_neox", "gemma3_text"])
def test_forward_has_no_sin_cos_and_no_rotate_half(model_type: str) -> None:
    stock = causal_lm(model_type)
    with recording() as seen:
        stock(PROMPT, use_cache=False)
    assert {"aten.sin", "aten.cos"} <= seen.ops  # the recorder does see the stock RoPE
    apply(adapter, stock)
    with recording() as seen:
        stock(PROMPT, use_cache=False)
    assert not {"aten.sin", "aten.cos"} & seen.ops


def test_rotate_half_slicing_is_gone_for_full_rotary() -> None:
    # Llama's only slices and cats are rotate_half's; after the adapter there are none.
    model = causal_lm("llama")
    attention = [layer.self_attn for layer in model.model.layers]
    with recording(within=attention) as seen:
        model(PROMPT, use_cache=False)
    assert {"aten.slice", "aten.cat"} <= seen.ops
    apply(adapter, model)
    with recording(within=attention) as seen:
        model(PROMPT, use_cache=False)
    assert not {"aten.slice", "aten.cat"} & seen.ops


@pytest.mark.parametrize("model_type", ["phi", "stablelm", "persimmon", "gpt_neox", "phi3"])
def test_partial_rotary_attention_no_longer_cuts_heads(model_type: str) -> None:
    model = causal_lm(model_type)
    attention = [m for n, m in model.named_modules() if n.endswith(("self_attn", "attention"))]
    with recording(within=attention) as seen:
        model(PROMPT, use_cache=False)
    assert "aten.slice" in seen.ops
    apply(adapter, model)
    if fused.matches(model):
        apply(fused, model)  # the fused QKV cuts of phi3 / gpt_neox are that adapter's business
    with recording(within=attention) as seen:
        model(PROMPT, use_cache=False)
    assert not {"aten.slice", "aten.cat", "aten.split", "aten.chunk"} & seen.ops


def test_multimodal_position_ids_are_computed_on_the_host_by_the_stock_module() -> None:
    model = causal_lm("llama")
    stock_rotary = model.model.rotary_emb
    x = torch.zeros(1, dtype=torch.float32)
    positions = torch.arange(12).view(3, 1, 4)  # mrope-style [3, batch, seq]
    with torch.no_grad():
        ref_cos, ref_sin = stock_rotary(x, positions)
    if ref_cos.shape[-1] != 2 * stock_rotary.inv_freq.numel():
        # older Transformers (5.15): Llama's rotary broadcasts such ids into mis-shaped tables
        apply(adapter, model)
        with pytest.raises(ValueError, match="does not support such position ids"):
            model.model.rotary_emb(x, positions)
        return
    apply(adapter, model)
    rotary = model.model.rotary_emb
    with recording() as seen, torch.no_grad():
        cos, sin = rotary(x, positions)
    assert cos.shape == ref_cos.shape
    assert torch.allclose(cos, ref_cos)
    assert torch.allclose(sin, ref_sin)
    assert {"aten.cos", "aten.sin"} <= seen.ops  # computed by the stock copy, on the host


def test_rotary_attributes_are_still_readable() -> None:
    model = causal_lm("llama")
    config, rope_type = model.model.rotary_emb.config, model.model.rotary_emb.rope_type
    apply(adapter, model)
    assert model.model.rotary_emb.rope_type == rope_type
    assert model.model.rotary_emb.config.hidden_size == config.hidden_size


def test_positions_beyond_the_first_table_are_exact() -> None:
    stock = causal_lm("llama", max_position_embeddings=8)
    adapted = causal_lm("llama", max_position_embeddings=8)
    apply(adapter, adapted)
    ids = torch.arange(3, 40)[None]  # 37 positions > the 8-row first table
    with torch.no_grad():
        ref = stock(ids).logits
        out = adapted(ids).logits
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("model_type", ["llama", "phi", "gemma3_text"])
def test_rollback_restores_the_model_exactly(model_type: str) -> None:
    model = causal_lm(model_type)

    assert_rollback_exact(adapter, model, prompt_logits)


def test_does_not_match_models_without_standard_rope() -> None:
    assert not adapter.matches(causal_lm("gpt2"))
    assert not adapter.matches(base_model("bert"))
    dynamic = causal_lm(
        "llama", rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    )
    assert not adapter.matches(dynamic)


def apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    # not a rotation at all: squares its inputs (the shape a family-specific form could have)
    return q * q * cos.unsqueeze(1), k * sin.unsqueeze(1)


class _Rotary(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inv_freq = torch.nn.Buffer(torch.ones(4), persistent=False)

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq
        return freqs.cos(), freqs.sin()


class _Attention(torch.nn.Module):
    head_dim = 8

    def forward(self, q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return apply_rotary_pos_emb(q, q, cos, sin)[0]


def test_declines_a_rotation_it_cannot_reproduce() -> None:
    # the form q*(cos@L + c) + (q@P)*(sin@L) is measured and then verified on random inputs:
    # a function of another form must make the adapter decline, never be replaced
    model = torch.nn.Module()
    model.rotary_emb = _Rotary()
    model.attn = _Attention()
    assert not adapter.matches(model)


def test_reproduces_interleaved_table_layouts() -> None:
    # GLM and Helium re-lay their tables out inside apply_rotary_pos_emb
    # (repeat_interleave of the first half): that layout is measured and baked into the tables
    model = causal_lm("helium")
    apply(adapter, model)
    rotary = model.model.rotary_emb
    assert isinstance(rotary, HostRotaryEmbedding)
    layout, _ = rotary.layout
    assert not torch.equal(layout, torch.eye(16))


def test_stock_forward_of_the_class_is_untouched() -> None:
    model = causal_lm("llama")
    cls = type(model.model.layers[0].self_attn)
    forward = cls.forward
    apply(adapter, model)
    assert cls.forward is forward
    other = causal_lm("llama", seed=1)
    assert "forward" not in other.model.layers[0].self_attn.__dict__
