"""Greedy decoding on the device against the CPU's (``spyre_adapters.agreement.decoding``):
the tokens must agree until a tie, which any rounding may decide either way."""

from __future__ import annotations

import warnings

import torch
from library_models import causal_lm

import spyre_adapters
import spyre_sim
from spyre_adapters.agreement import TIE_MARGIN, Decoding, decoding


def _scores(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def test_the_same_tokens_match() -> None:
    scores = [_scores([0.0, 1.0, 0.0]), _scores([2.0, 0.0, 0.0])]
    tokens = torch.tensor([[1, 0]])
    assert decoding(scores, tokens, tokens.clone()) == [Decoding(compared=2)]
    assert decoding(scores, tokens, tokens.clone())[0].describe() == "same 2 tokens"


def test_a_token_that_differs_where_the_cpu_was_sure_is_a_mismatch() -> None:
    scores = [_scores([0.0, 1.0, 0.0]), _scores([2.0, 0.0, 0.0])]
    (row,) = decoding(scores, torch.tensor([[1, 0]]), torch.tensor([[1, 2]]))
    assert row == Decoding(compared=2, diverged_at=1, at_tie=False)
    assert not row.matches
    assert row.describe() == "differs at step 1"


def test_a_token_that_differs_at_a_tie_matches_and_ends_the_comparison() -> None:
    near = 1.0 - TIE_MARGIN / 2  # the two best within the margin of the range (1.0)
    scores = [_scores([0.0, 1.0, near]), _scores([2.0, 0.0, 0.0])]
    (row,) = decoding(scores, torch.tensor([[1, 0]]), torch.tensor([[2, 1]]))
    assert row == Decoding(compared=1, diverged_at=0, at_tie=True)
    assert row.matches
    apart = 1.0 - 2 * TIE_MARGIN
    scores = [_scores([0.0, 1.0, apart]), _scores([2.0, 0.0, 0.0])]
    (row,) = decoding(scores, torch.tensor([[1, 0]]), torch.tensor([[2, 1]]))
    assert not row.matches


def test_a_suppressed_token_does_not_make_every_step_a_tie() -> None:
    """``min_new_tokens`` sets the end-of-sequence score to ``-inf``: the range is taken over
    the finite scores, so a confident step stays confident."""
    scores = [_scores([-torch.inf, 1.0, 0.0, 0.5])]
    (row,) = decoding(scores, torch.tensor([[1]]), torch.tensor([[3]]))
    assert row == Decoding(compared=1, diverged_at=0, at_tie=False)
    assert not row.matches


def test_rows_are_judged_apart_and_an_early_stop_shortens_the_comparison() -> None:
    scores = [_scores([0.0, 1.0, 0.0], [1.0, 0.0, 0.0]) for _ in range(3)]
    cpu = torch.tensor([[1, 1, 1], [0, 0, 0]])
    device = torch.tensor([[1, 1], [0, 2]])
    first, second = decoding(scores, cpu, device)
    assert first == Decoding(compared=2)
    assert second == Decoding(compared=2, diverged_at=1, at_tie=False)


def test_a_left_padded_batch_decodes_as_on_the_cpu_with_one_kv_head() -> None:
    """A Llama with one key/value head, heads of 8 and hidden 40, a batch with one row left
    padded: the device's greedy tokens are the CPU's up to any tie."""
    model = causal_lm("llama", hidden_size=40, intermediate_size=72, num_attention_heads=5,
                      num_key_value_heads=1, head_dim=8, vocab_size=256)  # fmt: skip
    ids = torch.tensor([[5, 17, 42, 7, 99, 3, 64, 12, 201], [0, 0, 0, 9, 8, 7, 6, 5, 4]])
    mask = (ids != 0).long()
    kw = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        cpu = model.generate(
            input_ids=ids, attention_mask=mask, output_scores=True, return_dict_in_generate=True,
            **kw,
        )  # fmt: skip
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")  # fp32 stored as fp16: the device's format
        spyre_adapters.prepare(model, "2026.09")
        device = model.to("spyre").generate(
            input_ids=ids.to("spyre"), attention_mask=mask.to("spyre"), **kw
        )
    rows = decoding(cpu.scores, cpu.sequences[:, 9:], device.cpu()[:, 9:])
    assert all(row.matches for row in rows), [row.describe() for row in rows]
    assert all(row.compared >= 1 for row in rows)
