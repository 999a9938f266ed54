"""Mistral: the Llama block with sliding-window attention."""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

from modeling_common import GenerationTesterMixin, ModelTester, ModelTesterMixin
from transformers import MistralConfig, MistralForCausalLM, MistralModel


class MistralModelTester(ModelTester):
    config_class = MistralConfig
    config_kwargs: ClassVar[dict[str, Any]] = {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "pad_token_id": 0, "tie_word_embeddings": False, "sliding_window": 32,
    }  # fmt: skip


class MistralModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    base_model_class = MistralModel
    head_model_class = MistralForCausalLM

    def setUp(self) -> None:
        self.model_tester = MistralModelTester()
