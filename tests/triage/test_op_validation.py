"""Validating a bridge candidate on the device against the CPU: what holds, what is rejected,
and the variants of other shapes and dtypes."""

from __future__ import annotations

import math

import pytest
import torch

import spyre_sim
from spyre_adapters.enablement.op_samples import Sample, shifted_sizes, variants
from spyre_adapters.enablement.op_validation import TOLERANCE, validate

A = torch.ops.aten
R = spyre_sim.resolve_stack("2026.09")


def captured(*args: object) -> Sample:
    return Sample("captured in a test", tuple(args), {}, captured=True)


def test_a_decomposition_that_holds_holds_on_every_variant() -> None:
    sample = captured(torch.randn(2, 8, 64).half())
    verdict = validate(A.isinf.default, "decomposition", [sample, *variants(sample)], R)
    assert verdict.holds, verdict.reason
    labels = [c.label for c in verdict.checks]
    assert labels == [
        "captured in a test",
        "fresh values",
        "special values",
        "memory order reversed",
        "sizes doubled",
        "sizes + 1",
        "bfloat16",
    ]
    assert [c.signature for c in verdict.checks][4:6] == [
        "float16[4, 16, 128]",
        "float16[3, 9, 65]",
    ]


def test_an_empty_table_rejects_a_decomposition_with_a_wrong_shortcut() -> None:
    """PyTorch's bucketize decomposition returns zeros of the input's floating dtype when there
    are no boundaries (the kernel: int64); each 1-D argument is also tried empty."""
    sample = Sample(
        "captured in a test",
        (torch.rand(1, 4).half(), torch.tensor([0.2, 0.5, 0.7]).half()),
        {"right": True},
        captured=True,
    )
    tried = [sample, *variants(sample)]
    assert tried[-1].label == "empty 1-D argument 2"
    assert tried[-1].signature == "float16[1, 4], float16[0], right=True"
    wrong = validate(A.bucketize.Tensor, "decomposition", tried, R)
    assert not wrong.holds
    assert "empty 1-D argument 2" in wrong.reason
    assert "torch.float16 where the CPU gives torch.int64" in wrong.reason
    assert validate(A.bucketize.Tensor, "host", tried, R).holds


def test_a_candidate_that_raises_at_the_release_is_rejected() -> None:
    sample = captured(torch.randn(1, 64, 4, 4).half(), [8, 8], None)
    verdict = validate(A.upsample_nearest2d.vec, "decomposition", [sample], R)
    assert not verdict.holds
    assert verdict.checks[0].outcome == "raises"
    assert "does not lower at 2026.09" in verdict.reason


def test_a_candidate_that_differs_on_special_values_is_rejected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # |x| as sqrt(x * x): right on ordinary values, inf where x * x overflows fp16 (the
    # extremes of the range among the special values)
    from spyre_adapters.library import _op_rewrites

    monkeypatch.setitem(_op_rewrites.REWRITES, "aten.abs.default", lambda x: torch.sqrt(x * x))
    sample = captured(torch.randn(4, 64).half())
    assert validate(A.abs.default, "rewrite", [sample], R).holds
    verdict = validate(A.abs.default, "rewrite", [sample, *variants(sample)], R)
    assert not verdict.holds
    failed = [c for c in verdict.checks if c.outcome == "mismatch"]
    assert [c.label for c in failed] == ["special values"]
    assert validate(A.abs.default, "host", [sample, *variants(sample)], R).holds


def test_integer_results_must_be_exact_and_floats_within_the_tolerance() -> None:
    from spyre_adapters.enablement.op_validation import _differ

    assert _differ(torch.tensor([1, 2]), torch.tensor([1, 3])) is not None
    ref = torch.tensor([1.0, 100.0], dtype=torch.float16)
    near = ref * (1 + TOLERANCE / 2)
    assert _differ(ref, near) is None
    assert _differ(ref, ref * (1 + 4 * TOLERANCE)) is not None
    assert _differ((ref, torch.tensor([0])), (ref,)) is not None
    assert _differ(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is None


def test_a_nan_result_moved_back_from_the_host_may_read_back_as_minus_inf() -> None:
    """A host bridge's NaN result enters the device and reads back as -inf (``nan-entry``):
    that is the transfer, not the candidate. Any other value in its place is a mismatch."""
    from spyre_adapters.enablement.op_validation import _differ

    nan = torch.tensor([1.0, float("nan")], dtype=torch.float16)
    assert _differ(nan, torch.tensor([1.0, -math.inf], dtype=torch.float16)) is None
    assert _differ(nan, torch.tensor([1.0, math.inf], dtype=torch.float16)) is not None
    assert _differ(nan, torch.tensor([1.0, 0.0], dtype=torch.float16)) is not None
    minus_inf = torch.tensor([-math.inf], dtype=torch.float16)
    assert _differ(minus_inf, torch.tensor([float("nan")], dtype=torch.float16)) is not None

    # end to end: a host candidate whose result is NaN (0 / 0) moved back to the device
    x = torch.tensor([[0.0, 1.0]], dtype=torch.float16)
    verdict = validate(A.div.Tensor, "host", [captured(x, x)], R)
    assert verdict.holds, verdict.reason


def test_only_a_backward_workspace_result_goes_uncompared() -> None:
    """``_ctc_loss``'s alignment table is its backward's workspace, partly left unset by the
    CPU kernel: not compared. Its loss is, and so is every result of other ops."""
    from spyre_adapters.enablement.op_validation import WORKSPACE_RESULTS, _differ

    skip = WORKSPACE_RESULTS["aten._ctc_loss"]
    loss, table = torch.tensor([2.5]), torch.zeros(2, 3)
    assert _differ((loss, table), (loss, table + 1e4), skip) is None
    assert _differ((loss, table), (loss + 1.0, table), skip) is not None
    assert _differ((loss, table), (loss, table + 1e4)) is not None
    assert set(WORKSPACE_RESULTS) == {"aten._ctc_loss"}


def test_ctc_loss_on_the_host_holds_on_its_loss() -> None:
    torch.manual_seed(0)
    log_probs = torch.randn(12, 3, 8).log_softmax(-1).half()
    targets = torch.randint(1, 8, (3, 4))
    lengths = torch.tensor([12, 10, 7]), torch.tensor([4, 3, 2])
    sample = captured(log_probs, targets, *lengths)
    verdict = validate(A._ctc_loss.Tensor, "host", [sample], R)
    assert verdict.holds, verdict.reason


def test_a_captured_call_the_cpu_kernel_refuses_rejects_the_candidate() -> None:
    sample = captured(torch.randn(3, 4).half(), torch.randn(5, 6).half())
    verdict = validate(A.mm.default, "host", [sample], R)
    assert not verdict.holds
    assert "the CPU kernel refuses the captured call" in verdict.reason


def test_variants_keep_index_ranges_and_sorted_offsets() -> None:
    offsets = torch.tensor([3, 5, 5, 16], dtype=torch.int32)  # ends at the row count, 16
    rows = torch.randn(16, 64).half()
    sample = captured(rows, offsets)
    for variant in variants(sample):
        x, offs = variant.args
        if variant.label.startswith("empty"):  # the table left empty: nothing to keep
            assert offs.numel() == 0
            continue
        assert bool((offs.diff() >= 0).all()), variant.label
        assert int(offs[-1]) == x.shape[0], variant.label
    ids = torch.tensor([0, 3, 1, 2])
    for variant in variants(captured(torch.randn(4, 64).half(), ids)):
        values = variant.args[1]
        if not values.numel():
            continue
        assert int(values.min()) >= 0
        assert int(values.max()) <= 3 or variant.label.startswith("sizes")


def test_bfloat16_variant_only_where_the_release_stores_it() -> None:
    sample = captured(torch.randn(4, 64).half())
    assert "bfloat16" in [v.label for v in variants(sample)]
    assert "bfloat16" not in [v.label for v in variants(sample, bf16=False)]


def test_a_rewrite_validated_at_four_experts_is_rejected_at_a_real_expert_count() -> None:
    """histc's rewrite counts exactly up to 33 bins and miscounts from 34 on (DL16 rounds
    ``62 * 64 / 63`` to 63): the tester's four-expert call alone passes it; its variant with
    the size arguments shifted (64 bins, ids up to 63) rejects it, and the host holds."""
    ids = torch.tensor([0, 3, 1, 2, 2, 0, 1, 3, 3, 1, 0, 2, 1, 1, 0, 3], dtype=torch.int32)
    sample = captured(ids, 4, 0, 3)
    assert validate(A.histc.default, "rewrite", [sample, *variants(sample)], R).holds
    tried = [sample, *variants(sample, op=A.histc.default)]
    wrong = validate(A.histc.default, "rewrite", tried, R)
    assert not wrong.holds
    assert wrong.reason.startswith("mismatch on sizes + 60 (int32[76], 64, 0, 63)")
    assert validate(A.histc.default, "host", tried, R).holds


def test_shifted_sizes_keep_the_relations_of_the_call() -> None:
    """Every integer of at least 2 moves up by the same amount: ``max = bins - 1`` still holds,
    ids stay below the bin count, sorted offsets stay sorted and end at the row count; an
    argument that names a dimension does not move; a call without a size-setting scalar gets
    no such variant."""
    ids = torch.tensor([0, 3, 1, 2], dtype=torch.int32)
    histc = shifted_sizes(captured(ids, 4, 0, 3), A.histc.default)
    assert histc is not None
    values, bins, low, high = histc.args
    assert (bins, low, high) == (64, 0, 63)
    assert values.shape == (64,)
    assert set(values.tolist()) <= {0, 1, 62, 63}
    offsets = torch.tensor([3, 5, 5, 16], dtype=torch.int32)
    rows = torch.randn(16, 64).half()
    weights = torch.randn(4, 64, 8).half()
    grouped = shifted_sizes(captured(rows, weights, offsets), A._grouped_mm.default)
    assert grouped is None  # sizes are only in the tensors: the size variants cover it
    topk = shifted_sizes(captured(torch.randn(4, 8).half(), 2, 1), A.topk.default)
    assert topk is not None
    assert topk.signature == "float16[64, 68], 62, 1"
    assert shifted_sizes(captured(torch.randn(4, 8).half()), A.isinf.default) is None
    bincount = shifted_sizes(
        Sample("captured", (torch.tensor([0, 5, 2]),), {"minlength": 6}, captured=True),
        A.bincount.default,
    )
    assert bincount is not None
    assert bincount.kwargs == {"minlength": 66}
    assert int(bincount.args[0].max()) <= 65
