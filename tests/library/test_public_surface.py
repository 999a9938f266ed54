"""An adapted model shows what the stock one shows: forward signature, config, state dict keys
and shapes, parameters, input/output embeddings -- at every release, with every resolved
adapter applied (``spyre_adapters.prepare``). And it computes with the weights it holds now:
weights loaded after ``prepare`` are the ones its forward uses."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from library_models import PIXELS, PROMPT, base_model, causal_lm, vision_model

import spyre_adapters
from spyre_adapters.contract import ModelEdit
from spyre_sim.catalogue import builtin_catalogue

# tester-like sizes: nothing a whole number of sticks, so the padding adapters apply too
MODELS = {
    "llama": lambda: causal_lm("llama", hidden_size=32, intermediate_size=37, head_dim=8,
                               num_attention_heads=4, num_key_value_heads=1, vocab_size=99),
    "gpt2": lambda: causal_lm("gpt2", n_embd=32, n_head=4, vocab_size=99),
    "bert-classifier": lambda: _bert_classifier(),
    "t5": lambda: base_model("t5", d_model=32, d_ff=37, num_heads=4, d_kv=8, vocab_size=99),
}  # fmt: skip


def _bert_classifier() -> torch.nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                        num_attention_heads=4, vocab_size=99)  # fmt: skip
    return BertForSequenceClassification(config).eval()


def _surface(model: torch.nn.Module) -> dict[str, Any]:
    embeddings = model.get_input_embeddings()  # type: ignore[operator]
    return {
        "signature": inspect.signature(model.forward),
        "config": model.config.to_dict(),  # type: ignore[union-attr,operator]
        "state_dict": {k: tuple(v.shape) for k, v in model.state_dict().items()},
        "parameters": {k: tuple(v.shape) for k, v in model.named_parameters()},
        "input_embeddings": (type(embeddings), tuple(embeddings.weight.shape)),
    }


@pytest.mark.parametrize("release", [r.name for r in builtin_catalogue().releases])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_prepared_model_shows_the_stock_surface(name: str, release: str) -> None:
    model = MODELS[name]()
    stock = _surface(model)
    spyre_adapters.prepare(model, release)
    assert _surface(model) == stock, [a.name for a in spyre_adapters.applied(model)]
    spyre_adapters.restore(model)
    assert _surface(model) == stock


def test_a_bound_forward_shows_the_signature_it_replaces() -> None:
    model = _bert_classifier()
    stock = inspect.signature(model.forward)

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        return type(self).forward(self, *args, **kwargs)

    edit = ModelEdit(model)
    edit.bind_forward(model, forward)
    assert inspect.signature(model.forward) == stock
    assert "inputs_embeds" in inspect.signature(model.forward).parameters
    assert inspect.signature(forward).parameters.keys() == {"self", "args", "kwargs"}  # untouched
    edit.rollback()
    assert inspect.signature(model.forward) == stock


def _whisper() -> torch.nn.Module:
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=4, decoder_attention_heads=4,
                           encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=99,
                           num_mel_bins=16, max_source_positions=30, max_target_positions=20,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           decoder_start_token_id=1)  # fmt: skip
    return WhisperModel(config).eval()


def _wav2vec2() -> torch.nn.Module:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                            intermediate_size=37, conv_dim=(32, 32), conv_stride=(4, 4),
                            conv_kernel=(8, 8), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=2, vocab_size=99)  # fmt: skip
    return Wav2Vec2Model(config).eval()


#: the models above, vision encoders whose patch embedding an adapter moves to the host, and
#: speech models (convolutional front ends, sinusoidal and convolutional positions)
LOADED = {
    **MODELS,
    "vit": lambda: vision_model("vit", hidden_size=32, num_attention_heads=4,
                                intermediate_size=37),
    "clip-vision": lambda: vision_model("clip_vision_model", hidden_size=32,
                                        num_attention_heads=4, intermediate_size=37),
    "whisper": _whisper,
    "wav2vec2": _wav2vec2,
}  # fmt: skip
FEATURES = torch.randn(2, 16, 60, generator=torch.Generator().manual_seed(5))
WAVES = torch.randn(2, 400, generator=torch.Generator().manual_seed(6))


def _main_output(name: str, model: torch.nn.Module) -> torch.Tensor:
    prompt = PROMPT % 99  # the vocabulary of MODELS
    with torch.no_grad():
        if name in ("vit", "clip-vision"):
            return model(pixel_values=PIXELS).last_hidden_state  # type: ignore[no-any-return]
        if name == "whisper":
            return model(input_features=FEATURES, decoder_input_ids=prompt).last_hidden_state  # type: ignore[no-any-return]
        if name == "wav2vec2":
            return model(input_values=WAVES).last_hidden_state  # type: ignore[no-any-return]
        if name == "t5":
            return model(input_ids=prompt, decoder_input_ids=prompt).last_hidden_state  # type: ignore[no-any-return]
        return model(input_ids=prompt).logits  # type: ignore[no-any-return]


@pytest.mark.parametrize("release", [r.name for r in builtin_catalogue().releases])
@pytest.mark.parametrize("name", sorted(LOADED))
def test_weights_loaded_after_prepare_are_the_ones_its_forward_uses(
    name: str, release: str
) -> None:
    """An adapter that keeps its own copy of a weight (on the host, or padded) must see a
    checkpoint loaded after ``prepare``: else the adapted model computes with the weights it
    was prepared with, a silent wrong answer."""
    model = LOADED[name]()
    torch.manual_seed(1)
    other = LOADED[name]()
    with torch.no_grad():
        for tensor in other.state_dict().values():
            if tensor.is_floating_point():
                tensor.normal_(0.0, 0.2)  # weights unlike the ones prepared
    spyre_adapters.prepare(model, release)
    model.load_state_dict(other.state_dict())
    applied = [str(a) for a in spyre_adapters.applied(model)]
    torch.testing.assert_close(
        _main_output(name, model), _main_output(name, other), rtol=1e-4, atol=1e-4,
        msg=lambda m: f"{m}\nadapters applied: {applied}",
    )  # fmt: skip


def _hooks(model: torch.nn.Module) -> dict[str, tuple[Any, Any]]:
    return {
        path: (module.__dict__["_hf_hook"], module.__dict__["forward"])
        for path, module in model.named_modules()
        if "_hf_hook" in module.__dict__
    }


@pytest.mark.parametrize("release", [r.name for r in builtin_catalogue().releases])
@pytest.mark.parametrize("name", sorted(LOADED))
def test_a_model_under_accelerate_hooks_gets_the_adapters_and_keeps_its_hooks(
    name: str, release: str
) -> None:
    """``from_pretrained(device_map=...)`` and accelerate's offloading wrap the forwards of the
    modules they manage. The adapters must see through that wrapper (else an offloaded model
    gets fewer adapters than the same model moved with ``.to``, and computes other numbers: a
    ViT missed ``sdpa-key-padding`` and ran into its miscompile), the hooks must keep running
    around the adapted forwards (they bring the offloaded weights in), and ``restore`` must
    leave the hooks as they were."""
    accelerate = pytest.importorskip("accelerate")
    plain = LOADED[name]()
    expected = _main_output(name, plain)
    wanted = [str(a) for a in spyre_adapters.prepare(plain, release).applied]
    hooked = LOADED[name]()
    hooked.load_state_dict(plain.state_dict())
    accelerate.cpu_offload(hooked, execution_device="cpu")  # weights move to meta until used
    hooks = _hooks(hooked)
    assert hooks, "accelerate attached no hook"
    stock_modules = dict(hooked.named_modules())
    applied = [str(a) for a in spyre_adapters.prepare(hooked, release).applied]
    assert applied == wanted
    modules = dict(hooked.named_modules())
    kept = {p: h for p, (h, _) in hooks.items() if modules.get(p) is stock_modules[p]}
    assert {p: h for p, (h, _) in _hooks(hooked).items()} == kept  # but on replaced modules
    torch.testing.assert_close(_main_output(name, hooked), expected, rtol=1e-4, atol=1e-4)
    spyre_adapters.restore(hooked)
    assert _hooks(hooked) == hooks
    torch.testing.assert_close(_main_output(name, hooked), expected, rtol=1e-4, atol=1e-4)
