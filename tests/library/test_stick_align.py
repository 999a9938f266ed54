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

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.stick_align import _residual_plan, adapter, aligned

FAMILIES = families("stick-align-padding", "1.0.0")  # 1.x: the version this module tests
# families whose residual stream (hidden size) is padded too, not only the FFN
RESIDUAL = ["llama", "mistral", "qwen2", "qwen3", "granite", "olmo2"]
MISALIGNED = {"hidden_size": 96, "intermediate_size": 160}


def test_residual_families_are_claimed_in_the_manifest() -> None:
    assert set(RESIDUAL) <= set(FAMILIES)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = causal_lm(model_type, **MISALIGNED), causal_lm(model_type, **MISALIGNED)
    assert adapter.matches(adapted)
    assert (_residual_plan(adapted) is not None) == (model_type in RESIDUAL)
    apply(adapter, adapted)
    for module in adapted.modules():
        if isinstance(module, torch.nn.Linear) and module is not adapted.get_output_embeddings():
            in_aligned = module.in_features % 64 == 0
            inner = module.in_features in (160, 192)
            assert in_aligned or (module.in_features == 96 and model_type not in RESIDUAL), module
            assert not inner or module.in_features == 192
    assert not adapter.matches(adapted), "an adapted model must not match again"
    assert_same_greedy(stock, adapted)


@pytest.mark.parametrize("model_type", RESIDUAL)
def test_residual_stream_is_padded_with_zero_lanes(model_type: str) -> None:
    model = causal_lm(model_type, **MISALIGNED)
    apply(adapter, model)
    with torch.no_grad():
        out = model(PROMPT, output_hidden_states=True)
    for hidden in out.hidden_states:
        assert hidden.shape[-1] == 128
        assert torch.count_nonzero(hidden[..., 96:]) == 0


def test_rms_norm_correction_is_exact_on_its_own() -> None:
    model = causal_lm("llama", **MISALIGNED)
    norm = model.model.norm
    x = torch.randn(2, 5, 96)
    with torch.no_grad():
        ref = norm(x)
    apply(adapter, model)
    padded = torch.cat([x, torch.zeros(2, 5, 32)], dim=-1)
    with torch.no_grad():
        out = model.model.norm(padded)
    assert torch.allclose(out[..., :96], ref, atol=1e-6)
    assert torch.count_nonzero(out[..., 96:]) == 0


def test_aligned_models_and_unknown_stream_users_are_declined() -> None:
    assert aligned(4304) == 4352
    assert not adapter.matches(causal_lm("llama"))  # hidden 64, intermediate 128
    assert _residual_plan(causal_lm("mixtral", **MISALIGNED)) is None  # experts read the stream
    assert _residual_plan(causal_lm("gpt2", n_embd=96)) is None  # LayerNorm on the stream


def test_a_failing_self_check_raises_and_rolls_back() -> None:
    model = causal_lm("llama", **MISALIGNED)
    # sabotage: a module outside the rules that silently uses the hidden size would change the
    # logits; emulate it by breaking one norm's eps after planning
    edit = ModelEdit(model)
    original = type(adapter)._pad_residual

    def broken(self: object, m: torch.nn.Module, e: ModelEdit, plan: dict[str, object]) -> None:
        original(adapter, m, e, plan)
        e.set_attr(m.model.norm, "variance_epsilon", 10.0)

    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(adapter), "_pad_residual", broken)
        with pytest.raises(ValueError, match="changed the logits"):
            adapter.apply(model, edit)
    edit.rollback()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, causal_lm("llama", **MISALIGNED), prompt_logits)


def test_half_precision_models_pass_the_self_check() -> None:
    stock = causal_lm("llama", **MISALIGNED).half()
    model = causal_lm("llama", **MISALIGNED).half()
    apply(adapter, model)
    with torch.no_grad():
        ref = stock(PROMPT).logits.float()
        out = model(PROMPT).logits.float()
    assert torch.equal(out.argmax(-1), ref.argmax(-1))
    assert torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0) >= 0.999
