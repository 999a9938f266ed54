"""All built-in adapters together, in manifest order, on one model: still the stock math."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from library_models import (
    MANIFESTS,
    PIXELS,
    VLM_PROMPT,
    assert_same_greedy,
    causal_lm,
    manifest,
    vision_language_model,
)

from spyre_adapters.contract import Adapter, ModelEdit


def _builtins() -> list[tuple[str, Adapter]]:
    found: list[tuple[int, str, Adapter]] = []
    # an adapter is a folder of version manifests (not, e.g., a __pycache__)
    for folder in sorted(p for p in MANIFESTS.iterdir() if p.is_dir() and any(p.glob("*.toml"))):
        data = manifest(folder.name)
        module, _, name = data["entry_point"].partition(":")
        found.append(
            (
                int(data.get("order", 100)),
                data["name"],
                getattr(importlib.import_module(module), name),
            )
        )
    return [(name, adapter) for _, name, adapter in sorted(found, key=lambda t: (t[0], t[1]))]


def _apply_all(model: torch.nn.Module) -> tuple[ModelEdit, list[str]]:
    edit = ModelEdit(model)
    names = []
    for name, adapter in _builtins():
        if adapter.matches(model):
            adapter.apply(model, edit)
            names.append(name)
    return edit, names


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    (
        "llama",
        {"hidden_size": 96, "intermediate_size": 160, "vocab_size": 832},
        {
            "stick-align-padding",
            "rope-rotation",
            "rms-norm",
            "host-mask",
            "contiguous-attention",
            "head-padding",
        },
    ),
    (
        "gemma",
        {"vocab_size": 832},
        {"rope-rotation", "rms-norm", "host-mask", "head-padding"},
    ),
    ("phi3", {}, {"rope-rotation", "rms-norm", "fused-projection-split", "host-mask"}),
    (
        "gpt2",
        {},
        {"pow-free-activation", "fused-projection-split", "host-mask", "layernorm-two-pass"},
    ),
    (
        "qwen3",
        {"intermediate_size": 160},
        {"stick-align-padding", "rope-rotation", "rms-norm", "host-mask"},
    ),
    ("phi", {}, {"rope-rotation", "pow-free-activation", "layernorm-two-pass", "host-mask"}),
]


@pytest.mark.parametrize(("model_type", "sizes", "expected"), CASES, ids=[c[0] for c in CASES])
def test_all_matching_builtins_together_keep_greedy_tokens(
    model_type: str, sizes: dict[str, Any], expected: set[str]
) -> None:
    stock, adapted = causal_lm(model_type, **sizes), causal_lm(model_type, **sizes)
    edit, names = _apply_all(adapted)
    assert expected <= set(names), names
    assert_same_greedy(stock, adapted)
    edit.rollback()
    assert_same_greedy(stock, adapted, atol=0.0)


def test_all_matching_builtins_together_on_an_image_text_model() -> None:
    stock, adapted = vision_language_model("llava"), vision_language_model("llava")
    _, names = _apply_all(adapted)
    assert {"host-masked-scatter", "host-patch-embed", "rope-rotation"} <= set(names)
    assert_same_greedy(stock, adapted, prompt=VLM_PROMPT, pixel_values=PIXELS[:1])
