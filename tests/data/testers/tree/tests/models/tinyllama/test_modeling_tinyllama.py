"""A model test in the manner of Transformers' own, for the testers loader: a test class whose
setUp makes a model tester with prepare_config_and_inputs_for_common()."""

import unittest

import torch
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel


class TinyLlamaModelTester:
    def __init__(self, parent):
        self.parent = parent
        self.batch_size = 2
        self.seq_length = 7
        self.vocab_size = 99

    def get_config(self):
        return LlamaConfig(
            vocab_size=self.vocab_size,
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
        )

    def prepare_config_and_inputs_for_common(self):
        generator = torch.Generator().manual_seed(0)
        shape = (self.batch_size, self.seq_length)
        input_ids = torch.randint(0, self.vocab_size, shape, generator=generator)
        return self.get_config(), {"input_ids": input_ids, "attention_mask": torch.ones(shape)}


class TinyLlamaModelTest(unittest.TestCase):
    all_model_classes = (LlamaModel, LlamaForCausalLM)

    def setUp(self):
        self.model_tester = TinyLlamaModelTester(self)

    def test_model(self):
        pass


class BrokenModelTest(unittest.TestCase):
    all_model_classes = (LlamaModel,)

    def setUp(self):
        raise RuntimeError("this tester cannot be made")

    def test_model(self):
        pass
