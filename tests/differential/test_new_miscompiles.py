"""Differential runs meet each silent miscompile of the newer evidence (docs/STACK.md §8) at a
release where it is open, and either avoid it (an adapter that lists its gap computes the
pattern another way: a match with nothing recorded) or flag it (the device recorded it and no
applied adapter claims it): never a silent mismatch, never a miss. Each avoided miscompile is
also shown flagged once the adapter that avoids it is taken away, so the avoidance is real."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spyre_adapters import Registry, default_registry
from spyre_adapters.enablement.differential import (
    Case,
    CaseRun,
    Outcome,
    build_case,
    draw_case,
    run_case,
)


def _case(family: str = "llama", **changes: Any) -> Case:
    case = draw_case(family, lambda options: options[0])  # the simplest drawn configuration
    fields = {f.name for f in dataclasses.fields(case.sizes)}
    sizes = {k: v for k, v in changes.items() if k in fields}
    rest = {k: v for k, v in changes.items() if k not in fields}
    return dataclasses.replace(case, sizes=dataclasses.replace(case.sizes, **sizes), **rest)


def _without(*taken: tuple[str, str | None]) -> Registry:
    """The built-in registry without the adapter versions ``taken`` (``(name, None)``: every
    version of ``name``)."""

    def kept(name: str, version: str) -> bool:
        return not any(name == n and v in (None, version) for n, v in taken)

    return default_registry().where(lambda m: kept(m.name, str(m.version)))


def _run(case: Case, release: str, registry: Registry | None = None) -> CaseRun:
    run = run_case(case, build_case(case), release, registry=registry)
    assert run.outcome.acceptable, run.detail
    return run


def _gap_timeline_says(gap: str, release: str) -> None:
    state = default_registry().catalogue.release(release).gap_state(gap)
    assert state.value == "miscompiled", f"{gap} is {state.value} at {release}"


FLAGGED, MATCH = Outcome.FLAGGED, Outcome.MATCH


@pytest.mark.parametrize(
    ("gap", "family", "changes", "release", "taken", "without"),
    [
        # gelu_new's pow(x, 3) returns |x| ** 4 (#4009); with weights scaled to their fan-in
        # the 0.044715 * x ** 3 term is small, so the wrong logits stay within the triage
        # metric (cosine 0.9997): a match, with the miscompile recorded in the run
        ("pow-cube", "gpt2", {}, "2026.05", (("pow-free-activation", "1.1.0"),), MATCH),
        # the stock RMSNorm's fp32 variance over 40 rows (#3804): rms-norm 1.1.0 keeps it at
        # the input dtype, fp32-row-sums computes any fp32 reduction of more than 32 rows as a
        # product; each avoids it alone (the test after this one), both taken away expose it
        (
            "fp32-reduce-rows",
            "llama",
            {"seq_len": 40},
            "2026.07",
            (("rms-norm", "1.1.0"), ("fp32-row-sums", None)),
            FLAGGED,
        ),
        # GPT-2's packed c_attn split (#4594)
        (
            "offset-view-input",
            "gpt2",
            {},
            "2026.08",
            (("fused-projection-split", None),),
            FLAGGED,
        ),
        # a decode step's [b, 1, h, d] query viewed [b, h, 1, d] (#3926); batch 2 keeps the
        # one-row RMSNorm (scratchpad-placement, below) out of the way. Without the adapter
        # the same SDPA call also reads strided k/v (sdpa-strided, open at 2026.07 too), and
        # the device records the first of the two reproductions that fires on a call
        (
            "decode-query-layout",
            "llama",
            {"decode": True, "batch": 2},
            "2026.07",
            (("contiguous-attention", None),),
            FLAGGED,
        ),
        # 100 keys: one stick and 36 keys of a partial stick (#3113, open at every release);
        # without the padding the 36 last positions attend to keys that score zero
        (
            "sdpa-seq-align",
            "llama",
            {"seq_len": 100},
            "2026.09",
            (("sdpa-key-padding", None),),
            FLAGGED,
        ),
        # 65 keys, as the space draws them: without the padding only the last position attends
        # to the one key of the partial stick, within the triage metric: a match, the miscompile
        # recorded
        (
            "sdpa-seq-align",
            "llama",
            {"seq_len": 65},
            "2026.09",
            (("sdpa-key-padding", None),),
            MATCH,
        ),
    ],
)
def test_an_adapter_avoids_the_miscompile_and_without_it_it_is_recorded(
    spyre: Any,
    gap: str,
    family: str,
    changes: dict[str, Any],
    release: str,
    taken: tuple[tuple[str, str | None], ...],
    without: Outcome,
) -> None:
    _gap_timeline_says(gap, release)
    case = _case(family, **changes)
    names = {name for name, _ in taken}
    avoided = _run(case, release)
    assert avoided.outcome is Outcome.MATCH, avoided.detail
    assert gap not in avoided.miscompiles
    assert names <= {label.split(" ")[0] for label in avoided.adapters}, avoided.adapters
    exposed = _run(case, release, _without(*taken))
    assert exposed.outcome is without, exposed.detail
    same_call = {"decode-query-layout": "sdpa-strided"}.get(gap)
    assert gap in exposed.miscompiles or same_call in exposed.miscompiles, exposed.miscompiles
    assert not names & {label.split(" ")[0] for label in exposed.adapters}


def test_fp32_row_sums_alone_avoids_the_fp32_variance_of_the_stock_rms_norm(spyre: Any) -> None:
    """Without ``rms-norm`` 1.1.0 the stock RMSNorm upcasts and reduces 40 fp32 rows at
    2026.07; ``fp32-row-sums`` computes that reduction as a product: nothing is recorded."""
    case = _case("llama", seq_len=40)
    run = _run(case, "2026.07", _without(("rms-norm", "1.1.0")))
    assert run.outcome is MATCH, run.detail
    assert "fp32-reduce-rows" not in run.miscompiles
    assert "fp32-row-sums 1.1.0" in run.adapters  # the version resolution picks
    assert not any(label.startswith("rms-norm") for label in run.adapters)


@pytest.mark.parametrize(
    ("gap", "changes", "release", "outcome"),
    [
        # a decode step of one row: x * rsqrt(mean(x * x)) of the RMSNorm (#4027)
        ("scratchpad-placement", {"decode": True, "batch": 1}, "2026.06", FLAGGED),
    ],
)
def test_a_miscompile_no_adapter_bridges_is_recorded(
    spyre: Any, gap: str, changes: dict[str, Any], release: str, outcome: Outcome
) -> None:
    _gap_timeline_says(gap, release)
    case = _case("llama", **changes)
    run = _run(case, release)
    assert run.outcome is outcome, run.detail
    assert gap in run.miscompiles
    bridging = [
        label for label in run.adapters if gap in default_registry().get(*label.split(" ", 1)).gaps
    ]
    assert not bridging, bridging


def test_contiguous_attention_1_2_avoids_the_decode_query_1_1_leaves_as_it_is(spyre: Any) -> None:
    """GPT-2's decode query is the ``[b, 1, h, d]`` projection viewed ``[b, h, 1, d]``: torch
    calls it contiguous, so 1.1's ``.contiguous()`` passes it on with its heads-inner strides
    and the device records ``decode-query-layout`` (flagged: 1.1 does not claim that gap). 1.2
    gives it row-major strides: a match with nothing recorded."""
    _gap_timeline_says("decode-query-layout", "2026.07")
    case = _case("gpt2", decode=True, batch=2)
    avoided = _run(case, "2026.07")
    assert avoided.outcome is MATCH, avoided.detail
    assert not avoided.miscompiles, avoided.miscompiles
    assert "contiguous-attention 1.2.0" in avoided.adapters, avoided.adapters
    exposed = _run(case, "2026.07", _without(("contiguous-attention", "1.2.0")))
    assert exposed.outcome is FLAGGED, exposed.detail
    assert "decode-query-layout" in exposed.miscompiles, exposed.miscompiles
    assert "contiguous-attention 1.1.0" in exposed.adapters, exposed.adapters
