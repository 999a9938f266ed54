"""``unfolded-mha``: ``multi_head_attention_forward`` run op by op under the other modes.

CPU: the same values bit for bit (the same code runs), for WavLM and for a stock
``nn.MultiheadAttention`` (masks, weights averaged or not); the adapted model shows what the
stock one shows and rolls back exactly. Device: a WavLM of sub-stick sizes stops at its first
projection without the adapter and matches the CPU with it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from library_models import CallNames, apply, assert_rollback_exact, randomize, registry_without
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.unfolded_mha import UnfoldedMhaMode, adapter

# WavLM's own call warns so (a bool key padding mask beside a float position bias), stock too
pytestmark = pytest.mark.filterwarnings(
    "ignore:Support for mismatched key_padding_mask:UserWarning"
)

_WAVLM: dict[str, Any] = {
    "hidden_size": 16,
    "conv_dim": (32, 32, 32),
    "conv_stride": (4, 4, 4),
    "conv_kernel": (8, 8, 8),
    "conv_bias": False,
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 20,
    "vocab_size": 32,
}  # fmt: skip  (Transformers' WavLM tester)


def wavlm(seed: int = 0) -> nn.Module:
    from transformers import WavLMConfig, WavLMModel

    torch.manual_seed(seed)
    return randomize(WavLMModel(WavLMConfig(**_WAVLM)), seed).eval()


def _audio(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(3, 1024, generator=gen)
    mask = torch.ones(3, 1024, dtype=torch.long)
    mask[1, 700:] = 0  # a padded batch row
    return values, mask


class Attends(nn.Module):
    """A stock ``nn.MultiheadAttention`` (which calls ``multi_head_attention_forward``)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(24, 3, batch_first=True)

    def forward(self, x: torch.Tensor, padding: torch.Tensor, average: bool) -> Any:
        return self.attn(x, x, x, key_padding_mask=padding, average_attn_weights=average)


def test_same_values_as_stock_on_the_cpu() -> None:
    stock, adapted = wavlm(), wavlm()
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert not adapter.matches(adapted), "an adapted model must not match again"
    values, mask = _audio()
    with torch.no_grad():  # the forward hooks enter the mode
        out = adapted(values, attention_mask=mask, output_attentions=True)
        ref = stock(values, attention_mask=mask, output_attentions=True)
    assert list(out.keys()) == list(ref.keys())
    assert torch.equal(out.last_hidden_state, ref.last_hidden_state)
    for a, b in zip(out.attentions, ref.attentions, strict=True):
        assert torch.equal(a, b)
    assert adapted.state_dict().keys() == stock.state_dict().keys()


@pytest.mark.parametrize("average", [True, False])
def test_a_stock_multihead_attention_is_the_same(average: bool) -> None:
    torch.manual_seed(0)
    stock = Attends().eval()
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    x = torch.randn(2, 5, 24)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        ref = stock(x, padding, average)
        out = adapted(x, padding, average)
    assert torch.equal(out[0], ref[0])
    assert torch.equal(out[1], ref[1])


def test_the_mode_shows_the_ops_inside() -> None:
    below = CallNames()
    seen = below.seen
    torch.manual_seed(0)
    stock = Attends().eval()
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)
    x = torch.randn(2, 5, 24)
    with torch.no_grad(), below:
        stock(x, None, True)
    assert "linear" not in seen  # stock: the whole call is handed over, its ops unseen
    seen.clear()
    with torch.no_grad(), below:  # the adapted forward enters the mode above this one
        adapted(x, None, True)
    assert {"linear", "softmax", "bmm"} <= set(seen)
    with torch.no_grad(), below, UnfoldedMhaMode():  # the mode alone does the same
        seen.clear()
        stock(x, None, True)
    assert {"linear", "softmax", "bmm"} <= set(seen)


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreFallbackWarning")  # warned once per process
def test_runs_on_the_device_where_the_stock_model_fails() -> None:
    stock = wavlm()
    values, _ = _audio()
    with torch.no_grad():
        ref = stock(values).last_hidden_state
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        without = registry_without(adapter.name)
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=without)
        with pytest.raises(spyre_sim.SpyreLoweringError, match="stick-align"):
            plain.to("spyre")(values.to("spyre"))

        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        assert "unfolded-mha" in {a.name for a in spyre_adapters.applied(adapted)}
        out = adapted.to("spyre")(values.to("spyre")).last_hidden_state.cpu().float()
    assert out.shape == ref.shape
    cos = torch.nn.functional.cosine_similarity(out.flatten(1), ref.flatten(1), dim=1)
    assert bool((cos > 0.99).all()), cos


def test_rollback_restores_the_model_exactly() -> None:
    model = wavlm()
    values, mask = _audio()

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(values, attention_mask=mask).last_hidden_state  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, model, probe)


def test_does_not_match_models_without_it() -> None:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    assert not adapter.matches(Wav2Vec2Model(Wav2Vec2Config(**_WAVLM)))
    with pytest.raises(ValueError, match="no module calls"):
        adapter.apply(nn.Linear(4, 4), None)  # type: ignore[arg-type]
