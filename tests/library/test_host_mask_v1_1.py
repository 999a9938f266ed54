"""host-mask 1.1.0: 1.0.1's host-built masks, kept boolean where the model reads them as
booleans. 1.0.1 gave such a model an additive mask, whose ``logical_not`` is true exactly where
attention is allowed (Nemotron ASR streaming: cosine 0.77 against the stock model)."""

from __future__ import annotations

import copy

import pytest
import torch
from library_models import adapted_pair, apply, assert_rollback_exact, assert_same_greedy, causal_lm
from library_models import families as listed
from torch import nn
from transformers import PretrainedConfig
from transformers.masking_utils import create_bidirectional_mask

from spyre_adapters.library.host_mask import adapter as adapter_1_0_1
from spyre_adapters.library.host_mask_v1_1 import adapter, reads_mask_as_bool

FAMILIES = listed("host-mask", "1.1.0")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    extra = {"attn_implementation": "eager"} if model_type == "gemma2" else {}
    stock, adapted = adapted_pair(adapter, lambda t: causal_lm(t, **extra), model_type)
    assert_same_greedy(stock, adapted)


class MaskedScores(nn.Module):
    """Scores masked with the boolean mask, as NVIDIA's streaming encoders mask theirs."""

    def forward(self, scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(attention_mask.logical_not(), float("-inf")).softmax(-1)


class AdditiveScores(nn.Module):
    def forward(self, scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return (scores + attention_mask).softmax(-1)


class Encoder(nn.Module):
    def __init__(self, scores: nn.Module) -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.config._attn_implementation = "sdpa"
        self.proj = nn.Linear(8, 8)
        self.scores = scores

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=x, attention_mask=attention_mask
        )
        h = self.proj(x)
        return self.scores((h @ h.transpose(-1, -2))[:, None], mask)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    return x, mask


def test_a_mask_the_model_reads_as_a_boolean_stays_one() -> None:
    torch.manual_seed(0)
    stock = Encoder(MaskedScores()).eval()
    assert reads_mask_as_bool(stock)
    x, mask = _inputs()
    with torch.no_grad():
        expected = stock(x, mask)
        old = copy.deepcopy(stock)
        apply(adapter_1_0_1, old)
        inverted = old(x, mask)
        new = copy.deepcopy(stock)
        apply(adapter, new)
        kept = new(x, mask)
    assert not torch.allclose(inverted, expected, equal_nan=True)  # 1.0.1's silent wrong answer
    torch.testing.assert_close(kept, expected, equal_nan=True)
    assert_rollback_exact(adapter, copy.deepcopy(stock), lambda m: m(x, mask))


def test_a_mask_the_model_adds_stays_additive_and_finite() -> None:
    """As in 1.0.1: the attention below receives the mask (SDPA adds it), so it is additive."""
    torch.manual_seed(0)
    stock = Encoder(AdditiveScores()).eval()
    assert not reads_mask_as_bool(stock)
    seen: list[torch.Tensor] = []
    x, mask = _inputs()
    with torch.no_grad():
        adapted = copy.deepcopy(stock)
        apply(adapter, adapted)
        adapted.scores.register_forward_pre_hook(lambda m, args: seen.append(args[1]))
        adapted(x, mask)
    (given,) = seen
    assert given.is_floating_point()
    assert bool(torch.isfinite(given).all())
    assert bool((given[1, 0, :, 3:] < -1e30).all())
    assert bool((given[1, 0, :, :3] == 0).all())
