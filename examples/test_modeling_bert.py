"""BERT: an encoder with token-type and position embeddings, LayerNorm, GELU."""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

from modeling_common import ModelTester, ModelTesterMixin
from transformers import BertConfig, BertForMaskedLM, BertModel


class BertModelTester(ModelTester):
    config_class = BertConfig
    config_kwargs: ClassVar[dict[str, Any]] = {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "max_position_embeddings": 64, "pad_token_id": 0,
    }  # fmt: skip


class BertModelTest(ModelTesterMixin, unittest.TestCase):
    base_model_class = BertModel
    head_model_class = BertForMaskedLM

    def setUp(self) -> None:
        self.model_tester = BertModelTester()
