"""Qwen2: the Llama block with biased q/k/v projections."""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

from modeling_common import GenerationTesterMixin, ModelTester, ModelTesterMixin
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Model


class Qwen2ModelTester(ModelTester):
    config_class = Qwen2Config
    config_kwargs: ClassVar[dict[str, Any]] = {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "pad_token_id": 0, "tie_word_embeddings": False,
    }  # fmt: skip


class Qwen2ModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    base_model_class = Qwen2Model
    head_model_class = Qwen2ForCausalLM

    def setUp(self) -> None:
        self.model_tester = Qwen2ModelTester()
