"""The built-ins as prepare() resolves them at 2026.05, on the emulated device, against the CPU."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import PROMPT, causal_lm, cosine

REALISTIC = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "head_dim": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
CASES = {
    "llama": {"rope-rotation", "rms-norm", "host-mask", "contiguous-attention"},
    "gemma2": {"rope-rotation", "rms-norm", "softmax-input-dtype"},
    "phi": {"rope-rotation", "layernorm-two-pass"},
    "gpt_neox": {"rope-rotation", "fused-projection-split", "layernorm-two-pass"},
    "gpt2": {"fused-projection-split", "layernorm-two-pass", "host-mask"},
}
# Gemma2's softcapped attention runs eager (softmax in the forward) by default from
# Transformers 5.2x; 5.15 picks sdpa, where softmax-input-dtype has nothing to adapt. Pin it.
ATTENTION = {"gemma2": "eager"}


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_prepared_model_matches_the_cpu_on_the_device_at_2026_05(model_type: str) -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    import spyre_adapters

    sizes = dict(REALISTIC)
    if model_type == "gpt2":
        sizes = {"n_embd": 256}
    model = causal_lm(model_type, **sizes)
    if model_type in ATTENTION:
        model.set_attn_implementation(ATTENTION[model_type])
    with torch.no_grad():
        ref = model(PROMPT, attention_mask=torch.ones_like(PROMPT)).logits
    spyre_adapters.prepare(model, "2026.05")
    names = {a.name for a in spyre_adapters.applied(model)}
    assert CASES[model_type] <= names, names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process downcast notices
        model = model.half().to("spyre")
        with spyre_sim.use_stack("2026.05"), torch.no_grad():
            ids = PROMPT.to("spyre")
            out = model(ids, attention_mask=torch.ones_like(PROMPT).to("spyre"), use_cache=False)
            logits = out.logits.cpu().float()
    assert cosine(logits, ref) >= 0.99
    assert torch.equal(logits.argmax(-1), ref.argmax(-1))
