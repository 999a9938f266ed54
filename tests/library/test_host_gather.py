from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    causal_lm,
    cosine,
    encoder,
    families,
    last_hidden,
)

from spyre_adapters.library.host_gather import HostGatherMode, adapter

FAMILIES = families("host-gather")
INPUTS = {"input_ids": PROMPT, "attention_mask": torch.ones_like(PROMPT)}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_hidden_states_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, encoder, model_type)
    ref = last_hidden(stock, **INPUTS)
    out = last_hidden(adapted, **INPUTS)
    assert cosine(out, ref) >= 0.9999
    assert torch.equal(out, ref)


def test_gather_runs_under_the_host_mode() -> None:
    model = encoder("bert")
    seen: list[bool] = []
    original = torch.gather

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        stack = torch.overrides._get_current_function_mode_stack()
        seen.append(any(isinstance(mode, HostGatherMode) for mode in stack))
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "gather", spy)
        with torch.no_grad():
            model(**INPUTS)
            apply(adapter, model)
            model(**INPUTS)
    assert seen == [False, True]  # stock: no mode; adapted: the gather runs inside the mode


def test_rollback_restores_the_model_exactly() -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        return last_hidden(m, **INPUTS)

    assert_rollback_exact(adapter, encoder("bert"), probe)


def test_does_not_match_models_without_gather() -> None:
    assert not adapter.matches(causal_lm("llama"))


def test_bert_runs_on_the_device_at_2026_05() -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    import spyre_adapters

    model = encoder("bert", hidden_size=256, intermediate_size=512)
    ref = last_hidden(model, **INPUTS)
    spyre_adapters.prepare(model, "2026.05")
    assert "host-gather" in {a.name for a in spyre_adapters.applied(model)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process downcast notices
        model = model.half().to("spyre")
        with spyre_sim.use_stack("2026.05"):
            out = last_hidden(model, **{k: v.to("spyre") for k, v in INPUTS.items()})
    assert cosine(out.cpu().float(), ref) >= 0.99
