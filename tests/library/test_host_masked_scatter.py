from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    PIXELS,
    VLM_PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    vision_language_model,
)

from spyre_adapters.library.host_masked_scatter import HostMaskedScatterMode, adapter

FAMILIES = families("host-masked-scatter")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, vision_language_model, model_type)
    assert_same_greedy(stock, adapted, prompt=VLM_PROMPT, pixel_values=PIXELS[:1])


def test_the_splice_runs_under_the_host_mode_and_only_there() -> None:
    model = vision_language_model("llava")
    active: list[bool] = []

    def spy(*_: Any) -> None:
        stack = torch.overrides._get_current_function_mode_stack()
        active.append(any(isinstance(mode, HostMaskedScatterMode) for mode in stack))

    model.model.language_model.register_forward_pre_hook(spy)
    apply(adapter, model)
    with torch.no_grad():
        model(input_ids=VLM_PROMPT, pixel_values=PIXELS[:1])
    assert active == [True]
    assert not any(
        isinstance(m, HostMaskedScatterMode)
        for m in torch.overrides._get_current_function_mode_stack()
    )


def test_mode_computes_masked_scatter_like_torch() -> None:
    base = torch.zeros(2, 3, 4)
    mask = torch.zeros(2, 3, 1, dtype=torch.bool)
    mask[0, 1] = True
    mask[1, 2] = True
    source = torch.arange(8.0).view(2, 4)
    expected = base.masked_scatter(mask, source)
    with HostMaskedScatterMode():
        out = base.masked_scatter(mask, source)
        inplace = base.clone()
        inplace.masked_scatter_(mask, source)
    assert torch.equal(out, expected)
    assert torch.equal(inplace, expected)


def test_rollback_restores_the_model_exactly() -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(input_ids=VLM_PROMPT, pixel_values=PIXELS[:1]).logits  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, vision_language_model("llava"), probe)


def test_does_not_match_text_only_models() -> None:
    assert not adapter.matches(causal_lm("llama"))
