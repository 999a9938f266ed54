"""Shared model-tester machinery for the example suite (Transformers ``test_modeling_common``
style): each family module defines a ``ModelTester`` that builds a tiny config and inputs, and
a ``unittest.TestCase`` that mixes in these checks. Everything goes to ``torch_device``.
"""

from __future__ import annotations

import tempfile
from typing import Any, ClassVar

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.testing_utils import backend_manual_seed, torch_device

# fp16 on the device (DL16 under numerics emulation): the tolerance real projects use per op
ATOL = 5e-3


def ids_tensor(shape: list[int], vocab_size: int, seed: int = 0) -> torch.Tensor:
    """Random token ids built on the device, the way Transformers' own ``ids_tensor`` does
    (a flat tensor on ``torch_device``, then viewed to the shape): the harness's own work."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(0, vocab_size, (int(torch.tensor(shape).prod()),), generator=generator)
    return torch.tensor(values.tolist(), dtype=torch.long, device=torch_device).view(shape)


class ModelTester:
    """Builds a tiny config of one family and matching inputs. Sizes keep every matmul
    dimension a multiple of 64, as real checkpoints' are."""

    config_class: type[PretrainedConfig]
    config_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, batch_size: int = 2, seq_length: int = 8, vocab_size: int = 256) -> None:
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.vocab_size = vocab_size

    def get_config(self) -> PretrainedConfig:
        config_class: Any = self.config_class
        config: PretrainedConfig = config_class(vocab_size=self.vocab_size, **self.config_kwargs)
        return config

    def prepare_config_and_inputs(self) -> tuple[PretrainedConfig, dict[str, torch.Tensor]]:
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = torch.ones(self.batch_size, self.seq_length, dtype=torch.long)
        attention_mask = attention_mask.to(torch_device)
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


class ModelTesterMixin:
    """Checks every family gets: forward shapes, batching equivalence, save/load, training."""

    model_tester: ModelTester
    base_model_class: type[PreTrainedModel]
    head_model_class: type[PreTrainedModel]
    hidden_size: int = 64

    def _model(self, model_class: type[PreTrainedModel]) -> tuple[Any, dict[str, Any]]:
        config, inputs = self.model_tester.prepare_config_and_inputs()
        backend_manual_seed(torch_device, 0)
        model: Any = model_class(config)
        model.to(torch_device)
        model.eval()
        return model, inputs

    def test_model_forward(self) -> None:
        model, inputs = self._model(self.base_model_class)
        with torch.no_grad():
            out = model(**inputs)
        tester = self.model_tester
        expected = (tester.batch_size, tester.seq_length, self.hidden_size)
        assert tuple(out.last_hidden_state.shape) == expected
        assert out.last_hidden_state.device.type == torch.device(torch_device).type
        assert bool(torch.isfinite(out.last_hidden_state.cpu()).all())

    def test_head_forward(self) -> None:
        model, inputs = self._model(self.head_model_class)
        with torch.no_grad():
            logits = model(**inputs).logits
        tester = self.model_tester
        assert tuple(logits.shape) == (tester.batch_size, tester.seq_length, tester.vocab_size)
        assert bool(torch.isfinite(logits.cpu()).all())

    def test_batching_equivalence(self) -> None:
        model, inputs = self._model(self.head_model_class)
        with torch.no_grad():
            batched = model(**inputs).logits.cpu()
            for row in range(self.model_tester.batch_size):
                single = model(**{k: v[row : row + 1] for k, v in inputs.items()}).logits.cpu()
                torch.testing.assert_close(single[0], batched[row], atol=ATOL, rtol=ATOL)

    def test_save_load(self) -> None:
        model, inputs = self._model(self.head_model_class)
        with torch.no_grad():
            first = model(**inputs).logits.cpu()
        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)  # straight from the device
            reloaded: Any = type(model).from_pretrained(directory)
        reloaded.to(torch_device)
        reloaded.eval()
        with torch.no_grad():
            second = reloaded(**inputs).logits.cpu()
        torch.testing.assert_close(first, second, atol=ATOL, rtol=ATOL)

    def test_training(self) -> None:
        model, inputs = self._model(self.head_model_class)
        model.train()
        out = model(**inputs, labels=inputs["input_ids"])
        out.loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        assert grads
        assert all(g is not None for g in grads)


class GenerationTesterMixin:
    """Greedy generation for causal LMs."""

    model_tester: ModelTester
    head_model_class: type[PreTrainedModel]
    max_new_tokens = 4

    def test_greedy_generate(self) -> None:
        config, inputs = self.model_tester.prepare_config_and_inputs()
        backend_manual_seed(torch_device, 0)
        model: Any = self.head_model_class(config)
        model = model.to(torch_device).eval()
        with torch.no_grad():
            out = model.generate(
                **inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                pad_token_id=config.pad_token_id or 0,
            )  # fmt: skip
        tester = self.model_tester
        prompt = inputs["input_ids"].cpu()
        out = out.cpu()
        assert tuple(out.shape) == (tester.batch_size, tester.seq_length + self.max_new_tokens)
        assert torch.equal(out[:, : tester.seq_length], prompt)
        assert int(out.min()) >= 0
        assert int(out.max()) < tester.vocab_size
