"""host-complex-rope: complex-form RoPE (DeepSeek-V2, Llama 4) computed on the host."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact, causal_lm

import spyre_adapters
import spyre_sim
from spyre_adapters.library.host_complex_rope import HostComplexMode, adapter, reaches_complex

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])
DEEPSEEK = {"vocab_size": 99, "hidden_size": 64, "intermediate_size": 64,
            "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
            "first_k_dense_replace": 1, "kv_lora_rank": 32, "q_lora_rank": None,
            "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16,
            "n_group": 1, "topk_group": 1}  # fmt: skip
LLAMA4 = {"vocab_size": 99, "hidden_size": 64, "intermediate_size": 64,
          "intermediate_size_mlp": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 2}  # fmt: skip
FAMILIES = {"deepseek_v2": DEEPSEEK, "llama4_text": LLAMA4}


def _model(model_type: str) -> torch.nn.Module:
    return causal_lm(model_type, **FAMILIES[model_type])


def _logits(model: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS.to(device)).logits  # type: ignore[no-any-return]


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_same_logits_as_stock_on_the_cpu(model_type: str) -> None:
    stock, adapted = _model(model_type), _model(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert torch.equal(_logits(adapted), _logits(stock))


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _model("deepseek_v2"), _logits)


def test_does_not_match_real_rope() -> None:
    assert not adapter.matches(causal_lm("llama"))


def _rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs).flatten(-2)


def test_reaches_complex_through_module_functions() -> None:
    assert reaches_complex(_rotate)
    assert not reaches_complex(test_does_not_match_real_rope)


def test_complex_values_stay_on_the_host_and_the_real_result_comes_back() -> None:
    x = torch.randn(2, 4, 8)
    angles = torch.randn(4, 4)
    expected = _rotate(x, torch.polar(torch.ones_like(angles), angles))
    # layout checks off: the pair split [.., 8] -> [.., 4, 2] is head-padding's business
    with (
        warnings.catch_warnings(),
        spyre_sim.use_stack("2026.09"),
        spyre_sim.configure(layout_checks=False),
    ):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        dx, dangles = x.to("spyre"), angles.to("spyre")
        with HostComplexMode():
            freqs = torch.polar(torch.ones_like(dangles), dangles)
            assert freqs.device.type == "cpu"
            assert freqs.is_complex()
            assert freqs.to("spyre") is freqs  # held by the host for the device
            assert freqs.to(torch.complex128).dtype == torch.complex128  # not a move: computed
            out = _rotate(dx, freqs.to("spyre"))
        assert out.device.type == "spyre"
        # the device stores DL16: within its precision of the float32 rotation
        torch.testing.assert_close(out.cpu().float(), expected, atol=2e-2, rtol=1e-2)
        with pytest.raises(spyre_sim.SpyreLoweringError):
            torch.polar(torch.ones_like(dangles), dangles)  # outside the mode: the gap


def test_deepseek_v2_runs_on_the_device_and_matches() -> None:
    reference = _logits(_model("deepseek_v2"))
    model = _model("deepseek_v2")
    spyre_adapters.prepare(model, "2026.09")
    assert "host-complex-rope" in {a.name for a in spyre_adapters.applied(model)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_device = model.half().to("spyre")
        with spyre_sim.use_stack("2026.09"):
            out = _logits(on_device, "spyre").cpu().float()
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert cosine > 0.99
