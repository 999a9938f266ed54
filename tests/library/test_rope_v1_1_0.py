"""rope-rotation 1.1: 1.0's rotation, declined where its host tables cannot be built."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import PROMPT, apply, causal_lm

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.rope import adapter as rope_1_0
from spyre_adapters.library.rope_v1_1_0 import adapter


def _glm4v_text() -> torch.nn.Module:
    """GLM-4V's language model: a stock rotary embedding whose forward takes 3-D (mrope)
    position ids."""
    from transformers import Glm4vTextConfig, Glm4vTextModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Glm4vTextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2, vocab_size=99)  # fmt: skip
        return Glm4vTextModel(config).eval()


def test_multimodal_rotary_is_declined_where_1_0_failed_in_apply() -> None:
    model = _glm4v_text()
    assert rope_1_0.matches(model)
    with pytest.raises((IndexError, RuntimeError)):  # 1.0 builds tables from 1-D positions
        rope_1_0.apply(model, ModelEdit(model))
    assert not adapter.matches(_glm4v_text())


@pytest.mark.parametrize("model_type", ["llama", "phi"])
def test_the_standard_rotary_is_adapted_as_by_1_0(model_type: str) -> None:
    stock, by_1_0, by_1_1 = (causal_lm(model_type) for _ in range(3))
    assert adapter.matches(by_1_1)
    apply(rope_1_0, by_1_0)
    apply(adapter, by_1_1)
    with torch.no_grad():
        expected = stock(input_ids=PROMPT).logits
        old = by_1_0(input_ids=PROMPT).logits
        new = by_1_1(input_ids=PROMPT).logits
    assert torch.equal(new, old)
    assert torch.allclose(new, expected, atol=1e-4, rtol=1e-4)
