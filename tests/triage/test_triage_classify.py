"""classify() and compare() with stand-in runs: every category, every criterion."""

from __future__ import annotations

import pytest
import torch

from spyre_adapters.agreement import MIN_COSINE, Comparison, compare
from spyre_adapters.enablement.classification import classify
from spyre_adapters.enablement.results import Category, DeviceRun, GapHit, RunError, TriageResult

MATCH = Comparison(True, 0.9999, 0.01, 1.0, 6, "test")
NO_MATCH = Comparison(False, 0.5, 2.0, 0.5, 6, "test")


def lowering(gap: str) -> RunError:
    return RunError("lowering", "SpyreLoweringError", f"{gap} fails", gap, "aten.x.default", "m.a")


def failed(gap: str) -> DeviceRun:
    return DeviceRun(ran=False, error=lowering(gap), gaps=[GapHit(gap, "aten.x.default", "m.a")])


def test_native_when_the_stock_run_matches() -> None:
    category, _ = classify(DeviceRun(ran=True, comparison=MATCH), None, {})
    assert category is Category.NATIVE


def test_adapted_when_only_the_adapted_run_matches() -> None:
    adapted = DeviceRun(ran=True, comparison=MATCH, adapters=["rope-rotation 1.0.0"])
    category, detail = classify(failed("sin-cos"), adapted, {"sin-cos": ["rope-rotation"]})
    assert category is Category.ADAPTED
    assert "rope-rotation 1.0.0" in detail


def test_blocked_names_the_gap_without_adapter() -> None:
    category, detail = classify(failed("conv2d"), failed("conv2d"), {"conv2d": []})
    assert category is Category.BLOCKED
    assert "`conv2d`" in detail
    assert "m.a" in detail


def test_gap_listed_by_an_unapplied_adapter_is_not_implemented() -> None:
    adapted = failed("offset-slice")
    adapted.not_applied = {"fused-projection-split": "does not match this model"}
    category, detail = classify(
        failed("offset-slice"), adapted, {"offset-slice": ["fused-projection-split"]}
    )
    assert category is Category.NOT_IMPLEMENTED_ADAPTER
    assert "does not match this model" in detail


def test_mismatch_when_it_runs_but_differs() -> None:
    adapted = DeviceRun(ran=True, comparison=NO_MATCH, miscompiles=["rotate-half"])
    category, detail = classify(failed("sin-cos"), adapted, {"sin-cos": ["rope-rotation"]})
    assert category is Category.MISMATCH
    assert "rotate-half" in detail


def test_a_mismatch_names_the_emulator_limits_met_on_the_way() -> None:
    """A run whose numbers went beyond what the emulator's fp16 host tensors hold is no
    evidence about the device: the detail says so, and the result keeps the counts."""
    adapted = DeviceRun(
        ran=True, comparison=NO_MATCH, adapters=["a 1.0.0"], emulator_limits={"fp16-range": 9}
    )
    category, detail = classify(failed("x"), adapted, {"x": ["a"]})
    assert category is Category.MISMATCH
    assert "emulator limits: fp16-range x9" in detail
    assert "not the device's answer" in detail
    _, plain = classify(failed("x"), DeviceRun(ran=True, comparison=NO_MATCH), {"x": ["a"]})
    assert "emulator" not in plain
    result = TriageResult(
        "f", "2026.07", "realistic", category, detail, stock=None, adapted=adapted
    )
    again = TriageResult.from_json(result.to_json())
    assert again.adapted is not None
    assert again.adapted.emulator_limits == {"fp16-range": 9}


def test_stock_mismatch_without_adapted_run_is_a_mismatch() -> None:
    category, _ = classify(DeviceRun(ran=True, comparison=NO_MATCH), None, {})
    assert category is Category.MISMATCH


def test_prepare_failure_is_adapter_failed() -> None:
    adapted = DeviceRun(ran=False, error=RunError("prepare", "AdapterApplyError", "boom"))
    category, detail = classify(failed("sin-cos"), adapted, {})
    assert category is Category.ADAPTER_FAILED
    assert detail == "boom"


def test_other_device_exception_is_device_error() -> None:
    adapted = DeviceRun(ran=False, error=RunError("other", "RuntimeError", "RuntimeError: x"))
    category, _ = classify(failed("sin-cos"), adapted, {})
    assert category is Category.DEVICE_ERROR


def test_category_values_are_stable() -> None:
    # Values are a public contract (JSON, HTML, CI scripts): adding is fine, renaming is not.
    assert {c.value for c in Category} >= {
        "native",
        "adapted",
        "blocked",
        "not-implemented-adapter",
        "mismatch",
        "adapter-failed",
        "device-error",
        "build-failed",
        "reference-failed",
        "worker-crashed",
        "worker-timeout",
        "internal-error",
    }
    assert {c for c in Category if c.enabled} == {Category.NATIVE, Category.ADAPTED}


def logits(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor([rows])


def test_compare_causal_lm_needs_top1_at_every_scored_position() -> None:
    ref = logits([[5.0, 1.0, 0.0], [0.0, 4.0, 1.0]])
    same = compare(ref, ref.clone(), logits=True)
    assert same.matches
    assert same.top1 == 1.0
    assert same.scored == 2
    wide = torch.arange(64.0).repeat(1, 2, 1) / 10  # top-1 beats top-2 by 0.1: scored
    flipped = wide.clone()
    flipped[0, 1, 62] = 6.35  # a nearly identical vector, but another argmax at position 1
    verdict = compare(wide, flipped, logits=True)
    assert verdict.cosine > MIN_COSINE  # cosine alone would accept it
    assert not verdict.matches
    assert verdict.top1 == 0.5


def test_compare_ignores_tied_positions() -> None:
    ref = logits([[5.0, 1.0, 0.0], [3.0, 3.0001, 0.0]])  # position 1 is a tie
    out = logits([[5.0, 1.0, 0.0], [3.0001, 3.0, 0.0]])
    verdict = compare(ref, out, logits=True)
    assert verdict.scored == 1
    assert verdict.matches


def test_compare_base_uses_cosine() -> None:
    ref = torch.randn(1, 4, 64, generator=torch.Generator().manual_seed(0))
    assert compare(ref, ref + 1e-3, logits=False).matches
    assert not compare(ref, -ref, logits=False).matches


def test_compare_rejects_nan_and_shape_changes() -> None:
    ref = torch.ones(1, 2, 64)
    bad = ref.clone()
    bad[0, 0, 0] = float("nan")
    assert not compare(ref, bad, logits=False).matches
    assert not compare(ref, torch.ones(1, 3, 64), logits=False).matches


def test_result_json_round_trip_without_nan() -> None:
    run = DeviceRun(
        ran=True,
        comparison=Comparison(False, float("nan"), float("inf"), None, 0, "x"),
        gaps=[GapHit("sin-cos", None, "model.rotary_emb", 2)],
    )
    result = TriageResult("llama", "2026.05", "realistic", Category.MISMATCH, "d", stock=run)
    data = result.to_json()
    assert data["stock"]["comparison"]["cosine"] is None  # JSON has no NaN
    again = TriageResult.from_json(data)
    assert again.category is Category.MISMATCH
    assert again.stock is not None
    assert again.stock.gaps == run.gaps


@pytest.mark.parametrize("category", list(Category))
def test_every_category_survives_json(category: Category) -> None:
    result = TriageResult("f", "2026.05", "tiny", category, "d")
    assert TriageResult.from_json(result.to_json()).category is category
    assert result.to_json()["enabled"] is category.enabled


def test_padded_positions_are_not_compared() -> None:
    """A query row whose every key is masked has no defined result (PyTorch's SDPA gives 0
    with a boolean mask, the mean of the values with an additive finfo.min mask): only the
    unpadded positions are compared."""
    from spyre_adapters.agreement import padding_positions

    reference = torch.randn(2, 5, 8)
    output = reference.clone()
    output[1, 0] = 3.0  # a padded position of the second sample
    inputs = {"attention_mask": torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]])}
    keep = padding_positions(inputs, reference, "last_hidden_state")
    assert keep is not None
    assert keep.tolist() == [[True] * 5, [False] + [True] * 4]
    assert not compare(reference, output, logits=False).matches
    assert compare(reference, output, logits=False, positions=keep).matches
    output[0, 2] = 3.0  # an unpadded one
    assert not compare(reference, output, logits=False, positions=keep).matches


def test_padding_positions_of_a_subsampled_sequence() -> None:
    """An audio encoder's strided convolutions shorten the sequence (Parakeet: 1024 frames in,
    128 out) and read the mask as lengths: the output frames a row's first ``n`` frames reach
    are kept, ``n`` its unpadded frames."""
    from spyre_adapters.agreement import padding_positions

    mask = torch.zeros(3, 16, dtype=torch.long)
    for row, n in enumerate((16, 9, 8)):
        mask[row, :n] = 1
    keep = padding_positions({"attention_mask": mask}, torch.zeros(3, 4, 5), "last_hidden_state")
    assert keep is not None
    assert keep.sum(dim=1).tolist() == [4, 3, 2]  # ceil(16/4), ceil(9/4), ceil(8/4)
    assert keep[1].tolist() == [True, True, True, False]
    scattered = padding_positions({"attention_mask": mask.flip(1)}, torch.zeros(3, 4, 5), "x")
    assert scattered is not None
    assert torch.equal(scattered, keep)
    # a pooled output or a longer one: everything is compared
    assert padding_positions({"attention_mask": mask}, torch.zeros(3, 4), "pooler_output") is None
    longer = torch.zeros(3, 20, 5)
    assert padding_positions({"attention_mask": mask}, longer, "last_hidden_state") is None


def test_padding_positions_of_an_encoder_decoder_and_of_other_outputs() -> None:
    from spyre_adapters.agreement import padding_positions

    out = torch.zeros(1, 3, 4)
    inputs = {
        "attention_mask": torch.tensor([[1, 1, 1]]),
        "decoder_attention_mask": torch.tensor([[0, 1, 1]]),
    }
    decoder = padding_positions(inputs, out, "last_hidden_state")
    assert decoder is not None
    assert decoder.tolist() == [[False, True, True]]
    encoder = padding_positions(inputs, out, "encoder_last_hidden_state")
    assert encoder is not None
    assert encoder.tolist() == [[True, True, True]]
    assert padding_positions(inputs, torch.zeros(1, 4), "pooler_output") is None
    assert padding_positions({"attention_mask": torch.zeros(1, 3)}, out, "x") is None
    assert padding_positions({"attention_mask": torch.tensor([[0, 0, 0]])}, out, "x") is None


def test_a_mismatch_of_a_forward_that_draws_random_numbers_is_not_judged() -> None:
    from triage_standins import noisy_family

    from spyre_adapters.enablement.results import Category
    from spyre_adapters.enablement.triage import triage

    noisy = noisy_family(noisy=True)
    assert noisy.irreproducible() is not None
    result = triage(noisy, "2026.09", list_all_gaps=False)
    assert result.category is Category.REFERENCE_FAILED
    assert "two CPU forwards of the stock model differ" in result.detail
    steady = noisy_family(noisy=False)
    assert steady.irreproducible() is None
    assert triage(steady, "2026.09", list_all_gaps=False).category.enabled


def test_a_mismatch_that_only_rounding_chose_is_shown_by_replaying_the_cpus_choice() -> None:
    """A router whose best two scores are one DL16 value apart sends a row to another expert
    on the device: a mismatch, which triage counts (``rounding_ties``), replays with the CPU's
    choice at the tied rows, and then says matches: precision, the whole difference."""
    from triage_standins import routed_family

    from spyre_adapters.enablement.results import Category, TriageResult
    from spyre_adapters.enablement.triage import triage

    result = triage(routed_family(), "2026.09", list_all_gaps=False)
    run = result.adapted or result.stock
    assert run is not None
    assert result.category is Category.MISMATCH
    assert run.rounding_ties == {"aten.topk": 2}
    assert run.replayed is not None
    assert run.replayed.matches
    assert run.replayed_rows == 1
    assert "selections decided within one DL16 step: aten.topk x2 rows" in result.detail
    assert "rounding's choice was the whole difference" in result.detail
    again = TriageResult.from_json(result.to_json())
    assert again.adapted == result.adapted
    assert again.stock == result.stock


def test_a_replay_that_still_differs_leaves_the_mismatch_unexplained() -> None:
    from spyre_adapters.agreement import Comparison
    from spyre_adapters.enablement.classification import classify
    from spyre_adapters.enablement.results import Category, DeviceRun

    wrong = Comparison(False, 0.5, 2.0, criterion="cosine >= 0.99")
    run = DeviceRun(ran=True, comparison=wrong, rounding_ties={"aten.topk": 3})
    category, detail = classify(run, None, {})
    assert category is Category.MISMATCH
    assert detail.endswith("aten.topk x3 rows")  # not replayed: said, not explained
    run.replayed, run.replayed_rows = Comparison(False, 0.6, 1.5, criterion="c"), 1
    category, detail = classify(run, None, {})
    assert category is Category.MISMATCH
    assert "it still does not match (cosine 0.6000" in detail
    assert "whole difference" not in detail
