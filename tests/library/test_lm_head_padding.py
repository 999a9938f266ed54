from __future__ import annotations

import pytest
import torch
from library_models import (
    PROMPT,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    prompt_logits,
)

from spyre_adapters.library.lm_head_padding import (
    PaddedLMHead,
    adapter,
    padded_vocab,
    per_core_span,
)

FAMILIES = families("lm-head-padding", "1.0.0")  # 1.x: the version this module tests
VOCAB = 832  # 13 sticks: a prime stick count


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock = causal_lm(model_type, vocab_size=VOCAB)
    adapted = causal_lm(model_type, vocab_size=VOCAB)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    head = adapted.get_output_embeddings()
    assert isinstance(head, PaddedLMHead)
    assert head.weight.shape[0] == 896  # 14 sticks = 2 x 7
    assert not adapter.matches(adapted), "an adapted model must not match again"
    assert_same_greedy(stock, adapted)


def test_the_real_qwen_vocab_is_padded_to_fit_the_span() -> None:
    # 151936 = 2374 sticks = 2 x 1187: half of a 4096-wide fp16 head per core is ~594 MB
    assert per_core_span(2374, 4096) > 256 * 2**20
    padded = padded_vocab(151936, 4096)
    assert padded == 2400 * 64
    assert per_core_span(padded // 64, 4096) <= 256 * 2**20


def test_aligned_smooth_vocabs_are_left_alone() -> None:
    assert padded_vocab(32000, 4096) == 32000  # 500 sticks = 2^2 5^3
    assert not adapter.matches(causal_lm("llama", vocab_size=512))


def test_padding_rows_never_win_argmax() -> None:
    model = causal_lm("llama", vocab_size=VOCAB)
    apply(adapter, model)
    with torch.no_grad():
        model.lm_head.weight[:VOCAB] -= 100.0  # every true logit would now lose to a zero row
        logits = model(PROMPT).logits
    assert logits.shape[-1] == VOCAB


def test_tied_input_embedding_is_untouched() -> None:
    model = causal_lm("gemma", vocab_size=VOCAB, tie_word_embeddings=True)
    embedding = model.get_input_embeddings().weight
    before = embedding.detach().clone()
    apply(adapter, model)
    assert model.get_input_embeddings().weight is embedding
    assert torch.equal(embedding, before)
    assert embedding.shape[0] == VOCAB


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, causal_lm("llama", vocab_size=VOCAB), prompt_logits)


def test_does_not_match_models_without_a_linear_head() -> None:
    from library_models import config_for
    from transformers import AutoModel

    assert not adapter.matches(AutoModel.from_config(config_for("llama", vocab_size=VOCAB)))
