from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    base_model,
    causal_lm,
    cosine,
    families,
    last_hidden,
)

from spyre_adapters.library.host_position_bias import adapter

FAMILIES = families("host-position-bias")
INPUTS = {"input_ids": PROMPT, "decoder_input_ids": PROMPT[:, :4]}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_hidden_states_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, base_model, model_type)
    ref = last_hidden(stock, **INPUTS)
    out = last_hidden(adapted, **INPUTS)
    assert cosine(out, ref) >= 0.9999
    assert torch.allclose(out, ref, atol=1e-6)


def test_bias_is_built_from_the_host_table() -> None:
    model = base_model("t5")
    attention = model.encoder.block[0].layer[0].SelfAttention
    apply(adapter, model)
    calls: list[Any] = []
    table = attention.relative_attention_bias
    table.register_forward_hook(lambda *_: calls.append(1))
    bias = attention.compute_bias(5, 5, device=torch.device("cpu"))
    assert bias.shape == (1, 4, 5, 5)
    assert calls == []  # the model's own table is not used: the host copy is
    with torch.no_grad():
        table.weight.zero_()  # the snapshot taken at prepare time is unaffected
    assert torch.count_nonzero(attention.compute_bias(5, 5)) > 0


def test_rollback_restores_the_model_exactly() -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        return last_hidden(m, **INPUTS)

    model = base_model("t5")
    assert_rollback_exact(adapter, model, probe)
    assert "compute_bias" not in model.encoder.block[0].layer[0].SelfAttention.__dict__


def test_does_not_match_models_without_relative_bias() -> None:
    assert not adapter.matches(causal_lm("llama"))
