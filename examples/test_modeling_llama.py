"""Llama: RoPE, RMSNorm, SwiGLU MLP, grouped-query attention."""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

from modeling_common import GenerationTesterMixin, ModelTester, ModelTesterMixin
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel


class LlamaModelTester(ModelTester):
    config_class = LlamaConfig
    config_kwargs: ClassVar[dict[str, Any]] = {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "pad_token_id": 0, "tie_word_embeddings": False,
    }  # fmt: skip


class LlamaModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    base_model_class = LlamaModel
    head_model_class = LlamaForCausalLM

    def setUp(self) -> None:
        self.model_tester = LlamaModelTester()
