"""host-one-hot: MoE expert masks (one_hot of int64 indices) computed on the host."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, base_model, causal_lm

import spyre_adapters
import spyre_sim
from spyre_adapters.library.host_one_hot import HostOneHotMode, adapter

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])
SWITCH = {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4,
          "d_kv": 16, "num_experts": 4, "expert_capacity": 8, "vocab_size": 99,
          "num_sparse_encoder_layers": 2, "num_sparse_decoder_layers": 2}  # fmt: skip


def _switch() -> torch.nn.Module:
    return base_model("switch_transformers", **SWITCH)


def _hidden(model: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        ids = IDS.to(device)
        out = model(input_ids=ids, decoder_input_ids=ids)
    return out.last_hidden_state


def test_same_outputs_as_stock() -> None:
    stock, adapted = _switch(), _switch()
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert torch.equal(_hidden(adapted), _hidden(stock))


def test_one_hot_runs_under_the_host_mode() -> None:
    model = _switch()
    seen: list[bool] = []
    original = torch.nn.functional.one_hot

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        stack = torch.overrides._get_current_function_mode_stack()
        seen.append(any(isinstance(mode, HostOneHotMode) for mode in stack))
        return original(*args, **kwargs)

    apply(adapter, model)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.functional, "one_hot", spy)
        _hidden(model)
    assert seen
    assert all(seen)


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _switch(), _hidden)


def test_does_not_match_models_without_one_hot() -> None:
    assert not adapter.matches(causal_lm("llama"))


def test_switch_transformers_runs_on_the_device_and_matches() -> None:
    reference = _hidden(_switch())
    model = _switch()
    spyre_adapters.prepare(model, "2026.09")
    assert "host-one-hot" in {a.name for a in spyre_adapters.applied(model)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        on_device = model.half().to("spyre")
        with spyre_sim.use_stack("2026.09"):
            out = _hidden(on_device, "spyre").cpu().float()
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert cosine > 0.99
