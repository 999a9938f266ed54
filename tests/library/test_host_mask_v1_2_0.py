"""host-mask 1.2.0: 1.1's host-built masks, where a bidirectional mask the stock factory skips
under eager attention stays skipped. 1.1 built it for the factory's own query length, and a
model that hands it to a cross-attention over another sequence (BridgeTower in Transformers
5.15) stopped at a broadcast error the stock model never reaches; a mask of one query row
would fail the models that check a mask's shape (Autoformer)."""

from __future__ import annotations

import copy

import pytest
import torch
from library_models import adapted_pair, apply, assert_rollback_exact, assert_same_greedy, causal_lm
from library_models import families as listed
from torch import nn
from transformers import PretrainedConfig
from transformers.masking_utils import create_bidirectional_mask

from spyre_adapters.library.host_mask_v1_1 import adapter as adapter_1_1
from spyre_adapters.library.host_mask_v1_2_0 import adapter

FAMILIES = listed("host-mask", "1.2.0")
CAUSAL = [f for f in FAMILIES if f != "bridgetower"]


@pytest.mark.parametrize("model_type", CAUSAL)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    extra = {"attn_implementation": "eager"} if model_type == "gemma2" else {}
    stock, adapted = adapted_pair(adapter, lambda t: causal_lm(t, **extra), model_type)
    assert_same_greedy(stock, adapted)


class CrossEncoder(nn.Module):
    """Builds a mask over its ``memory`` tokens and uses it for the cross-attention of ``text``
    (another length) over them, as BridgeTower 5.15 uses its image mask."""

    def __init__(self, attention: str = "eager") -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.config._attn_implementation = attention
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(
        self, text: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor
    ) -> torch.Tensor:
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=memory, attention_mask=memory_mask
        )
        scores = (self.q(text) @ self.k(memory).transpose(-1, -2))[:, None]
        if mask is not None:
            if mask.shape != (text.shape[0], 1, memory.shape[1], memory.shape[1]):
                raise ValueError(f"mask of shape {tuple(mask.shape)}")  # as Autoformer checks
            scores = scores + mask
        return scores.softmax(-1)


def _cross_inputs(pad: bool, text: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(2, text, 8, generator=generator)
    memory = torch.randn(2, 5, 8, generator=generator)
    mask = torch.ones(2, 5, dtype=torch.long)
    if pad:
        mask[1, 3:] = 0
    return queries, memory, mask


def test_a_skipped_mask_serves_queries_of_another_length() -> None:
    torch.manual_seed(0)
    stock = CrossEncoder().eval()
    inputs = _cross_inputs(pad=False)
    with torch.no_grad():
        expected = stock(*inputs)
        old = copy.deepcopy(stock)
        apply(adapter_1_1, old)
        with pytest.raises(RuntimeError, match="must match"):
            old(*inputs)  # 1.1's [2, 1, 5, 5] against [2, 1, 3, 5] scores
        new = copy.deepcopy(stock)
        apply(adapter, new)
        torch.testing.assert_close(new(*inputs), expected)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_a_skipped_mask_stays_skipped_under_eager_only(attention: str) -> None:
    seen: list[torch.Tensor | None] = []

    class Recording(CrossEncoder):
        def forward(
            self, text: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor
        ) -> torch.Tensor:
            seen.append(
                create_bidirectional_mask(
                    config=self.config, inputs_embeds=memory, attention_mask=memory_mask
                )
            )
            return text

    model = Recording(attention).eval()
    apply(adapter, model)
    with torch.no_grad():
        model(*_cross_inputs(pad=False))
        model(*_cross_inputs(pad=True))
    skipped, padded = seen
    if attention == "eager":
        assert skipped is None  # what the stock factory returns
    else:  # 1.1's: no implicit causal path under SDPA
        assert skipped is not None
        assert skipped.shape == (2, 1, 5, 5)
        assert torch.equal(skipped, torch.zeros_like(skipped))
    assert padded is not None
    assert padded.shape == (2, 1, 5, 5)  # the stock factory materialises it: 1.1's mask
    assert torch.isfinite(padded).all()
    assert (padded[1, 0, :, 3:] < 0).all()


def test_the_same_as_stock_where_the_stock_mask_is_materialised() -> None:
    torch.manual_seed(0)
    stock = CrossEncoder().eval()
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)
    inputs = _cross_inputs(pad=True, text=5)  # the stock mask is [2, 1, 5, 5]: as many queries
    with torch.no_grad():
        torch.testing.assert_close(adapted(*inputs), stock(*inputs))


def _bridgetower() -> nn.Module:
    from transformers import BridgeTowerConfig, BridgeTowerModel

    config = BridgeTowerConfig(
        text_config={
            "vocab_size": 99,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "max_position_embeddings": 64,
        },
        vision_config={
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
    )
    torch.manual_seed(0)
    return BridgeTowerModel(config).eval()


def test_bridgetower_is_the_stock_model() -> None:
    stock = _bridgetower()
    assert adapter.matches(stock)
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)
    ids = torch.tensor([[5, 17, 42, 7], [9, 3, 11, 0]])
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = stock(input_ids=ids, pixel_values=pixels)
        got = adapted(input_ids=ids, pixel_values=pixels)
    torch.testing.assert_close(got.text_features, expected.text_features)
    torch.testing.assert_close(got.image_features, expected.image_features)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output)


def test_rollback_is_exact() -> None:
    torch.manual_seed(0)
    inputs = _cross_inputs(pad=False)
    assert_rollback_exact(adapter, CrossEncoder().eval(), lambda m: m(*inputs))
