"""delta-rule-rows: the chunked gated delta rule with its triangular solve in whole rows."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, causal_lm, families, state_snapshot

import spyre_sim
from spyre_adapters.library.delta_rule_rows import (
    NAME,
    _solves_triangular,
    adapter,
    chunk_gated_delta_rule,
    solve_in_rows,
)

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11], [3, 9, 27, 81, 44, 12, 6]])
FAMILIES = families("delta-rule-rows")
LINEAR = {"linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_conv_kernel_dim": 2}  # fmt: skip
OVERRIDES: dict[str, dict[str, Any]] = {
    "qwen3_next": {**LINEAR, "layer_types": ["linear_attention", "full_attention"],
                   "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                   "shared_expert_intermediate_size": 16},
    "qwen3_5_text": {**LINEAR, "layer_types": ["linear_attention", "full_attention"]},
    "qwen3_5_moe_text": {**LINEAR, "layer_types": ["linear_attention", "full_attention"],
                         "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                         "shared_expert_intermediate_size": 16},
    "olmo_hybrid": {**LINEAR, "layer_types": ["linear_attention", "full_attention"]},
}  # fmt: skip


def _stock() -> Any:
    module = importlib.import_module("transformers.models.qwen3_next.modeling_qwen3_next")
    return getattr(module, NAME)


#: Transformers 5.25 solves with linalg.solve_triangular (bridge-linalg-solve-triangular's case):
#: the adapter matches no model there, and its model-level tests run on Transformers 5.15 (the
#: CI's oldest-Transformers run and the shared test tree).
SOLVES_BY_SUBSTITUTION = not _solves_triangular(_stock())
substitution_only = pytest.mark.skipif(
    not SOLVES_BY_SUBSTITUTION,
    reason=f"the installed Transformers' {NAME} calls linalg.solve_triangular",
)


def _model(model_type: str) -> torch.nn.Module:
    return causal_lm(model_type, **OVERRIDES[model_type])


def _logits(model: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS.to(device)).logits  # type: ignore[no-any-return]


def _prefix_solve(system: torch.Tensor) -> torch.Tensor:
    """The stock forward substitution: prefix cuts of each row."""
    system = system.clone()
    for i in range(1, system.shape[-1]):
        row = system[..., i, :i].clone()
        sub = system[..., :i, :i].clone()
        system[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    return system


def test_whole_rows_solve_as_the_prefix_cuts_do() -> None:
    system = torch.randn(3, 2, 64, 64, generator=torch.Generator().manual_seed(0)).tril(-1) / 8
    torch.testing.assert_close(solve_in_rows(system.clone()), _prefix_solve(system))


def _inputs(batch: int, length: int, k_heads: int, v_heads: int, k_dim: int, v_dim: int) -> Any:
    gen = torch.Generator().manual_seed(length)
    return (
        torch.randn(batch, length, k_heads, k_dim, generator=gen),
        torch.randn(batch, length, k_heads, k_dim, generator=gen),
        torch.randn(batch, length, v_heads, v_dim, generator=gen),
        -torch.rand(batch, length, v_heads, generator=gen),
        torch.rand(batch, length, v_heads, generator=gen),
        torch.randn(batch, v_heads, k_dim, v_dim, generator=gen),
    )


@pytest.mark.parametrize(
    ("length", "k_heads", "initial", "final"),
    [(7, 4, False, True), (130, 2, True, True), (64, 4, True, False)],
)
def test_same_results_as_the_stock_function(
    length: int, k_heads: int, initial: bool, final: bool
) -> None:
    """One chunk, three chunks with a padded last one, exactly one; grouped value heads; with
    and without an initial and a final state. The stock function of Transformers 5.15 takes
    query and key already expanded to the value heads; later versions expand them inside."""
    q, k, v, g, beta, state = _inputs(2, length, k_heads, 4, 16, 8)
    kwargs = {"initial_state": state if initial else None, "output_final_state": final,
              "use_qk_l2norm_in_kernel": True}  # fmt: skip
    ours = chunk_gated_delta_rule(q, k, v, g, beta, **kwargs)
    try:
        stock = _stock()(q, k, v, g, beta, **kwargs)
    except RuntimeError:  # a version that does not expand grouped heads itself
        repeat = 4 // k_heads
        q, k = q.repeat_interleave(repeat, dim=2), k.repeat_interleave(repeat, dim=2)
        stock = _stock()(q, k, v, g, beta, **kwargs)
    assert ours[0].shape == stock[0].shape == (2, length, 4, 8)
    torch.testing.assert_close(ours[0], stock[0], rtol=1e-5, atol=1e-6)
    if final:
        torch.testing.assert_close(ours[1], stock[1], rtol=1e-5, atol=1e-6)
    else:
        assert ours[1] is None
        assert stock[1] is None


@substitution_only
@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_logits_as_stock_on_the_cpu(model_type: str) -> None:
    stock, adapted = _model(model_type), _model(model_type)
    assert adapter.matches(adapted)
    before = state_snapshot(adapted)
    edit = apply(adapter, adapted)
    assert len(edit) > 0
    after = state_snapshot(adapted)
    assert after.keys() == before.keys()
    assert all(torch.equal(after[key], before[key]) for key in before)
    assert not adapter.matches(adapted)  # applied once
    # the same quantities in the same order, but row sums over 64 columns instead of i: the
    # added terms are exact zeros, yet a longer reduction may group its float32 sums otherwise
    torch.testing.assert_close(_logits(adapted), _logits(stock), rtol=1e-5, atol=1e-5)


@substitution_only
def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _model("qwen3_next"), _logits)


def test_leaves_a_function_that_solves_with_linalg_to_the_bridge() -> None:
    def solving(system: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve_triangular(system, rhs, upper=False)

    def substituting(system: torch.Tensor) -> torch.Tensor:
        return solve_in_rows(system)

    wrapped = torch.nn.Module()
    wrapped.forward = solving  # type: ignore[method-assign]  # a module holding the function
    assert _solves_triangular(solving)
    assert _solves_triangular(wrapped)
    assert not _solves_triangular(substituting)


def test_does_not_match_models_without_the_function() -> None:
    assert not adapter.matches(causal_lm("llama"))
    with pytest.raises(ValueError, match="no forward calls a module-level"):
        apply(adapter, causal_lm("llama"))


def test_the_stock_solve_stops_on_the_device_and_the_rows_run_and_match() -> None:
    q, k, v, g, beta, state = _inputs(2, 7, 4, 4, 64, 64)
    kwargs = {"output_final_state": True, "use_qk_l2norm_in_kernel": True}  # as the models
    expected, expected_state = chunk_gated_delta_rule(
        q, k, v, g, beta, initial_state=state, **kwargs
    )
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        args = [t.to("spyre") for t in (q, k, v, g, beta)]
        # Transformers 5.15 cuts rows (sub-stick-head); later versions call linalg's
        # triangular solve, which nothing lowers (a bridge computes it on the host)
        with pytest.raises(spyre_sim.SpyreLoweringError, match=r"sub-stick-head|unlowered-op"):
            _stock()(*args, initial_state=state.to("spyre"), **kwargs)
        out, final = chunk_gated_delta_rule(*args, initial_state=state.to("spyre"), **kwargs)
        assert out.device.type == "spyre"
        out, final = out.cpu().float(), final.cpu().float()
    # DL16 keeps 9 fraction bits per stored value
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(final, expected_state, rtol=2e-2, atol=2e-2)


@substitution_only
def test_qwen3_next_runs_on_the_device_and_matches() -> None:
    import spyre_adapters

    reference = _logits(_model("qwen3_next"))
    model = _model("qwen3_next")
    spyre_adapters.prepare(model, "2026.09")
    assert "delta-rule-rows" in {a.name for a in spyre_adapters.applied(model)}
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")
        out = _logits(model.to("spyre"), "spyre").cpu().float()
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert cosine > 0.99
    assert (out.argmax(-1) == reference.argmax(-1)).float().mean() > 0.9
