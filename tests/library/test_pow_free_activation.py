from __future__ import annotations

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
    recording,
)

from spyre_adapters.library.pow_free_activation import adapter

FAMILIES = families("pow-free-activation")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, causal_lm, model_type)
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("model_type", ["gpt2", "persimmon"])
def test_forward_has_no_pow(model_type: str) -> None:
    model = causal_lm(model_type)
    with recording() as seen:
        model(PROMPT, use_cache=False)
    assert "aten.pow" in seen.ops
    apply(adapter, model)
    with recording() as seen:
        model(PROMPT, use_cache=False)
    assert "aten.pow" not in seen.ops


@pytest.mark.parametrize("name", ["gelu_new", "gelu_accurate", "gelu_python_tanh", "relu2"])
def test_each_activation_is_identical(name: str) -> None:
    from transformers.activations import ACT2FN

    module = ACT2FN[name]
    x = torch.linspace(-6, 6, 1001)
    with torch.no_grad():
        ref = module(x)
        edit_model = torch.nn.Sequential(module)
        apply(adapter, edit_model)
        out = edit_model(x)
    assert torch.equal(out, ref)


def test_default_gelu_tanh_is_left_alone() -> None:
    from transformers.activations import ACT2FN

    assert not adapter.matches(torch.nn.Sequential(ACT2FN["gelu_pytorch_tanh"]))
    assert not adapter.matches(causal_lm("llama"))


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, causal_lm("gpt2"), prompt_logits)
