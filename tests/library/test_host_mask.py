from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    prompt_logits,
)

from spyre_adapters.library.host_mask import adapter, finite_fill

FAMILIES = families("host-mask", "1.0.1")
SLIDING = {"mistral", "qwen2", "gemma2", "gemma3_text", "starcoder2"}
EAGER_ONLY = {"gemma2"}


def _model(model_type: str, attn: str = "sdpa") -> torch.nn.Module:
    extra: dict[str, Any] = {"attn_implementation": "eager" if model_type in EAGER_ONLY else attn}
    if model_type in SLIDING:
        extra["sliding_window"] = 4  # shorter than the prompt: the sliding mask matters
    return causal_lm(model_type, **extra)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, _model, model_type)
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("model_type", ["llama", "gpt2", "gemma3_text"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_left_padded_batch_matches_stock(model_type: str, attn: str) -> None:
    stock, adapted = _model(model_type, attn), _model(model_type, attn)
    apply(adapter, adapted)
    ids = torch.cat([PROMPT, PROMPT.flip(-1)])
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        ref = stock(ids, attention_mask=mask).logits[:, -1]
        out = adapted(ids, attention_mask=mask).logits[:, -1]
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("model_type", ["llama", "gpt2"])
def test_attention_gets_a_materialised_finite_mask(model_type: str) -> None:
    model = _model(model_type)
    seen: list[object] = []

    def grab(_: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append(kwargs.get("attention_mask"))

    attention = [m for n, m in model.named_modules() if n.endswith((".self_attn", ".attn"))]
    for module in attention:
        module.register_forward_pre_hook(grab, with_kwargs=True)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    assert all(m is None for m in seen)
    seen.clear()
    apply(adapter, model)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    for mask in seen:
        assert isinstance(mask, torch.Tensor)
        assert mask.dtype == torch.float32
        assert torch.isfinite(mask).all()
        assert mask.min().item() == finite_fill(torch.float32)
        assert torch.equal(mask[0, 0] == 0, torch.ones(9, 9, dtype=torch.bool).tril())


def test_a_caller_4d_additive_mask_keeps_its_biases() -> None:
    stock, adapted = _model("llama", "eager"), _model("llama", "eager")
    apply(adapter, adapted)
    bias = torch.linspace(-2.0, 0.0, 9).expand(1, 1, 9, 9).clone()
    bias = bias.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf"))
    with torch.no_grad():
        ref = stock(PROMPT, attention_mask=bias).logits
        out = adapted(PROMPT, attention_mask=bias).logits
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _model("llama"), prompt_logits)


def test_does_not_match_models_without_masking_utils() -> None:
    assert not adapter.matches(causal_lm("mamba"))
    assert not adapter.matches(torch.nn.Sequential(torch.nn.Linear(4, 4)))


def test_a_skipped_mask_stays_skipped_where_it_means_full_attention() -> None:
    # PaliGemma's Gemma attention has is_causal = False: without token_type_ids the stock
    # factory skips the mask and SDPA attends to every position. A causal mask built in its
    # place changed the model's output (cosine 0.981 against stock).
    from library_models import vision_language_model

    stock = vision_language_model("paligemma")
    adapted = vision_language_model("paligemma")
    attention = [m for m in adapted.modules() if type(m).__name__ == "GemmaAttention"]
    assert attention
    assert not any(m.is_causal for m in attention)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    with torch.no_grad():
        ref = stock(PROMPT).logits
        out = adapted(PROMPT).logits
    torch.testing.assert_close(out, ref)
