"""GPT-2: learned positions, fused Conv1D attention projection, gelu_new, LayerNorm."""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

from modeling_common import GenerationTesterMixin, ModelTester, ModelTesterMixin
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model


class GPT2ModelTester(ModelTester):
    config_class = GPT2Config
    config_kwargs: ClassVar[dict[str, Any]] = {
        "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "n_inner": 128,
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    }  # fmt: skip


class GPT2ModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    base_model_class = GPT2Model
    head_model_class = GPT2LMHeadModel

    def setUp(self) -> None:
        self.model_tester = GPT2ModelTester()
