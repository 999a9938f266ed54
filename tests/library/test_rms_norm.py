from __future__ import annotations

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    base_model,
    causal_lm,
    cosine,
    families,
    last_hidden,
    prompt_logits,
    recording,
)

from spyre_adapters.library.rms_norm import adapter

FAMILIES = families("rms-norm")
ENCODER_DECODERS = {"t5"}


def _seq2seq_inputs() -> dict[str, torch.Tensor]:
    return {"input_ids": PROMPT, "decoder_input_ids": PROMPT[:, :4]}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_results_as_stock(model_type: str) -> None:
    if model_type in ENCODER_DECODERS:
        stock, adapted = base_model(model_type), base_model(model_type)
        assert adapter.matches(adapted)
        apply(adapter, adapted)
        ref = last_hidden(stock, **_seq2seq_inputs())
        out = last_hidden(adapted, **_seq2seq_inputs())
        assert cosine(out, ref) >= 0.9999
        assert torch.allclose(out, ref, atol=1e-5)
        return
    stock, adapted = adapted_pair(adapter, causal_lm, model_type)
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("model_type", ["llama", "gemma", "qwen3"])
def test_norms_run_without_pow_or_casts(model_type: str) -> None:
    model = causal_lm(model_type).to(torch.bfloat16)
    norms = [m for m in model.modules() if "RMSNorm" in type(m).__name__]
    assert norms
    with recording(within=norms) as seen:
        model(PROMPT, use_cache=False)
    assert {"aten.pow", "aten._to_copy"} <= seen.ops  # the stock norms upcast and pow
    apply(adapter, model)
    with recording(within=norms) as seen:
        model(PROMPT, use_cache=False)
    assert not {"aten.pow", "aten._to_copy"} & seen.ops


def test_unit_offset_form_is_detected() -> None:
    # Gemma stores w - 1: with the plain form the output would be scaled by w, not 1 + w.
    model = causal_lm("gemma")
    norm = model.model.norm
    apply(adapter, model)
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        out = norm(x)
        expected = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + norm.eps) * (1.0 + norm.weight)
    assert torch.allclose(out, expected)


@pytest.mark.parametrize("model_type", ["llama", "gemma"])
def test_rollback_restores_the_model_exactly(model_type: str) -> None:
    assert_rollback_exact(adapter, causal_lm(model_type), prompt_logits)


@pytest.mark.parametrize("model_type", ["gpt2", "cohere", "phi"])
def test_does_not_match_layer_norm_models(model_type: str) -> None:
    assert not adapter.matches(causal_lm(model_type))
