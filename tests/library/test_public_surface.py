"""An adapted model shows what the stock one shows: forward signature, config, state dict keys
and shapes, parameters, input/output embeddings -- at every release, with every resolved
adapter applied (``spyre_adapters.prepare``)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from library_models import base_model, causal_lm

import spyre_adapters
from spyre_adapters.contract import ModelEdit
from spyre_sim.catalogue import builtin_catalogue

# tester-like sizes: nothing a whole number of sticks, so the padding adapters apply too
MODELS = {
    "llama": lambda: causal_lm("llama", hidden_size=32, intermediate_size=37, head_dim=8,
                               num_attention_heads=4, num_key_value_heads=1, vocab_size=99),
    "gpt2": lambda: causal_lm("gpt2", n_embd=32, n_head=4, vocab_size=99),
    "bert-classifier": lambda: _bert_classifier(),
    "t5": lambda: base_model("t5", d_model=32, d_ff=37, num_heads=4, d_kv=8, vocab_size=99),
}  # fmt: skip


def _bert_classifier() -> torch.nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                        num_attention_heads=4, vocab_size=99)  # fmt: skip
    return BertForSequenceClassification(config).eval()


def _surface(model: torch.nn.Module) -> dict[str, Any]:
    embeddings = model.get_input_embeddings()  # type: ignore[operator]
    return {
        "signature": inspect.signature(model.forward),
        "config": model.config.to_dict(),  # type: ignore[union-attr,operator]
        "state_dict": {k: tuple(v.shape) for k, v in model.state_dict().items()},
        "parameters": {k: tuple(v.shape) for k, v in model.named_parameters()},
        "input_embeddings": (type(embeddings), tuple(embeddings.weight.shape)),
    }


@pytest.mark.parametrize("release", [r.name for r in builtin_catalogue().releases])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_prepared_model_shows_the_stock_surface(name: str, release: str) -> None:
    model = MODELS[name]()
    stock = _surface(model)
    spyre_adapters.prepare(model, release)
    assert _surface(model) == stock, [a.name for a in spyre_adapters.applied(model)]
    spyre_adapters.restore(model)
    assert _surface(model) == stock


def test_a_bound_forward_shows_the_signature_it_replaces() -> None:
    model = _bert_classifier()
    stock = inspect.signature(model.forward)

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        return type(self).forward(self, *args, **kwargs)

    edit = ModelEdit(model)
    edit.bind_forward(model, forward)
    assert inspect.signature(model.forward) == stock
    assert "inputs_embeds" in inspect.signature(model.forward).parameters
    assert inspect.signature(forward).parameters.keys() == {"self", "args", "kwargs"}  # untouched
    edit.rollback()
    assert inspect.signature(model.forward) == stock
