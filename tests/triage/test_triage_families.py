"""The family builder: realistic (stick-aligned) sizes by default, tester sizes with TINY."""

from __future__ import annotations

import pytest

from spyre_adapters.enablement.families import build_family, candidate_families
from spyre_adapters.enablement.family_configs import family_config, first_layer_types
from spyre_adapters.enablement.size_presets import REALISTIC, TINY, FamilyBuildError


def test_candidates_are_transformers_model_types_with_a_model() -> None:
    from transformers import CONFIG_MAPPING

    families = candidate_families()
    assert families == sorted(families)
    assert {"llama", "gpt2", "bert", "t5", "vit", "llava"} <= set(families)
    assert all(f in CONFIG_MAPPING for f in families)
    # configs without any model class (e.g. the feature-extraction-only ones) are left out
    assert len(families) < len(list(CONFIG_MAPPING.keys()))


def test_realistic_llama_is_stick_aligned() -> None:
    config = family_config("llama")
    assert config.hidden_size % 64 == 0
    assert config.intermediate_size % 64 == 0
    assert config.vocab_size % 64 == 0
    assert config.hidden_size // config.num_attention_heads in (64, 128)
    assert config.num_key_value_heads < config.num_attention_heads  # GQA, as real checkpoints
    assert 1 <= config.num_hidden_layers <= 2


def test_tiny_keeps_transformers_tester_sizes() -> None:
    config = family_config("llama", preset=TINY)
    assert (config.hidden_size, config.intermediate_size, config.vocab_size) == (32, 37, 99)
    assert config.hidden_size % 64 != 0  # not stick aligned: what layout checks reject


@pytest.mark.parametrize("key", ["n_embd", "n_head", "n_layer", "vocab_size"])
def test_other_attribute_names_are_shrunk(key: str) -> None:
    from transformers import GPT2Config

    default = getattr(GPT2Config(), key)
    shrunk = getattr(family_config("gpt2"), key)
    assert shrunk < default
    assert shrunk in (REALISTIC.hidden, REALISTIC.heads, REALISTIC.layers, REALISTIC.vocab)


def test_multimodal_sub_configs_are_shrunk() -> None:
    config = family_config("llava")
    assert config.text_config.hidden_size == REALISTIC.hidden
    assert config.text_config.num_hidden_layers == REALISTIC.layers
    assert config.vision_config.hidden_size == REALISTIC.hidden
    assert config.vision_config.image_size == REALISTIC.image_size
    tiny = family_config("llava", preset=TINY)
    assert tiny.text_config.hidden_size == TINY.hidden


def test_build_gives_model_inputs_and_reference() -> None:
    built = build_family("gpt2")
    assert built.kind == "causal-lm"
    assert built.output_name == "logits"
    assert tuple(built.reference.shape) == (1, REALISTIC.seq_len, REALISTIC.vocab)
    again = built.run(built.model)
    assert bool((again - built.reference).abs().max() < 1e-5)


def test_the_built_model_has_never_run() -> None:
    """The reference is taken on a copy: a forward may cache tensors in plain attributes that
    ``.to(device)`` does not move (Mimi's codebook keeps ``_embed``)."""
    import torch

    ran: set[int] = set()
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, out: ran.add(id(module))
    )
    try:
        built = build_family("gpt2")
    finally:
        hook.remove()
    assert ran  # the reference forward ran, on another module
    assert not {id(m) for m in built.model.modules()} & ran


def test_build_of_an_encoder_compares_hidden_states() -> None:
    built = build_family("vit", preset=TINY)
    assert built.kind == "base"
    assert "pixel_values" in built.inputs
    assert built.reference.shape[-1] == TINY.hidden


def test_unknown_model_type_fails_at_config_stage() -> None:
    with pytest.raises(FamilyBuildError) as info:
        build_family("no-such-model-type")
    assert info.value.stage == "config"
    assert info.value.model_type == "no-such-model-type"
    assert "no-such-model-type" in str(info.value)


def test_a_config_leaving_kv_heads_unset_gets_one_per_query_head() -> None:
    # NemotronConfig defaults num_key_value_heads to None, which its attention cannot divide by
    config = family_config("nemotron")
    assert config.num_key_value_heads == config.num_attention_heads == REALISTIC.heads
    built = build_family("nemotron")
    assert built.reference is not None


def test_a_hybrid_cut_to_few_layers_keeps_an_attention_layer() -> None:
    hybrid = ["linear_attention"] * 3 + ["full_attention"]
    assert first_layer_types(hybrid * 2, 2) == ["linear_attention", "full_attention"]
    assert first_layer_types(["conv", "conv", "sliding_attention"], 1) == ["sliding_attention"]
    sliding = ["sliding_attention"] * 5 + ["full_attention"]
    assert first_layer_types(sliding, 2) == ["sliding_attention"] * 2  # attention kept already
    assert first_layer_types(["mamba"] * 4, 2) == ["mamba"] * 2  # no attention to keep
    config = family_config("qwen3_next")
    assert "full_attention" in config.layer_types
    assert build_family("qwen3_next").reference is not None  # an all-linear cut did not run


def test_a_dual_encoder_is_compared_on_its_largest_output_not_a_1x1_score() -> None:
    built = build_family("clip")
    # logits_per_image is 1x1 for one image and one text: its cosine is only a sign
    assert built.output_name != "logits_per_image"
    assert built.reference.numel() >= 64


def test_a_reference_that_vanishes_in_fp16_fails_the_build_at_stage_reference() -> None:
    with pytest.raises(FamilyBuildError) as caught:
        build_family("mobilenet_v2")  # random weights: activations shrink to ~1e-21
    assert caught.value.stage == "reference"
    assert "below fp16's smallest normal" in str(caught.value)
    assert "builds, but its CPU reference cannot judge a run" in str(caught.value)


def test_triage_calls_a_vanishing_reference_reference_failed() -> None:
    from spyre_adapters.enablement.results import Category
    from spyre_adapters.enablement.triage import triage_family

    (result,) = triage_family("mobilenet_v2", ["2026.09"])
    assert result.category is Category.REFERENCE_FAILED


@pytest.mark.parametrize("model_type", ["autoformer", "informer", "time_series_transformer"])
def test_a_forecaster_builds_with_a_horizon_and_a_past(model_type: str) -> None:
    built = build_family(model_type, preset=TINY)
    config = built.config
    assert config.prediction_length == TINY.seq_len
    assert config.num_time_features >= 1
    past = config.context_length + max(config.lags_sequence)
    assert tuple(built.inputs["past_values"].shape) == (TINY.batch, past)
    assert tuple(built.inputs["future_values"].shape) == (TINY.batch, TINY.seq_len)
    assert built.output_name == "last_hidden_state"
    assert built.reference.shape[1] > 0
