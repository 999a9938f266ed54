"""A family's config shrunk to a size preset.

No checkpoint is downloaded. The family's config class is instantiated with its defaults and
then shrunk (:func:`family_config`) to a size preset of
:mod:`spyre_adapters.enablement.size_presets`: ``REALISTIC`` (the default: stick-aligned sizes
a Spyre deployment meets, so the device's layout rules are exercised as on a real checkpoint)
or ``TINY`` (the sizes of Transformers' own model testers, not stick aligned), optionally
varied by ``Features`` (partial rotary, tied embeddings, sliding-window attention) where the
family has the feature. :func:`variants_for` says which of the preset's ``VARIANTS`` (one
key/value head; odd batch, sequence and vocabulary sizes) build a family differently.

Composite (multimodal) configs carry sub-configs (``text_config``, ``vision_config``,
``audio_config``, ...); each is shrunk with the same preset. Building the model from the
shrunk config is :mod:`spyre_adapters.enablement.families`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from spyre_adapters.enablement.size_presets import (
    NO_FEATURES,
    REALISTIC,
    VARIANTS,
    FamilyBuildError,
    Features,
    SizePreset,
)

__all__ = [
    "MAX_DEPTH_FIT_WIDTH",
    "family_config",
    "first_layer_types",
    "scale_widths",
    "is_config",
    "is_int",
    "variants_for",
]


_WIDTH = (
    "hidden_size",
    "d_model",
    "n_embd",
    "embed_dim",
    "dim",
    "model_dim",
    "word_embed_proj_dim",
)
_FFN = (
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "d_ff",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "ffn_hidden_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "expert_intermediate_size",
    "dense_intermediate_size",
)
_LAYERS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_decoder_layers",
    "num_encoder_layers",
)
_HEADS = (
    "num_attention_heads",
    "n_head",
    "n_heads",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "num_heads",
)
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
_HEAD_DIM = ("head_dim", "d_kv", "kv_channels", "attention_head_dim")
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "num_selected_experts")
_PROJECTION = ("projection_dim", "text_embed_dim", "vision_embed_dim")


def is_int(value: object) -> bool:
    """An ``int`` config value (``True``/``False`` are not sizes)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_config(value: object) -> bool:
    """A Transformers config (a sub-config of a composite one, say)."""
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def _overrides(
    config: Any, preset: SizePreset, fit: str = "preset", features: Features = NO_FEATURES
) -> dict[str, Any]:
    """The constructor arguments that shrink ``config`` to ``preset`` (sub-configs as dicts)
    and set ``features``.

    ``fit="depth"`` shrinks only what does not change the shapes of a layer (layer count,
    vocabulary, image and audio lengths, expert count): the family's own widths are kept.
    """
    attrs: Mapping[str, Any] = vars(config)
    out: dict[str, Any] = {}
    default_layers = next((attrs[k] for k in _LAYERS if is_int(attrs.get(k))), None)
    _series_overrides(attrs, preset, out)
    if fit == "depth":
        _depth_overrides(attrs, preset, out, default_layers)
        _feature_overrides(attrs, preset, features, out)
        for key, value in attrs.items():
            if is_config(value):
                sub = _overrides(value, preset, fit, features)
                sub["model_type"] = value.model_type
                out[key] = {**_plain_dict(value), **sub}
        return out

    def put(keys: tuple[str, ...], value: int, *, allow_none: bool = False) -> None:
        for key in keys:
            if key in attrs and (is_int(attrs[key]) or (allow_none and attrs[key] is None)):
                out[key] = value

    put(_WIDTH, preset.hidden)
    if "dim" in attrs and is_int(attrs.get("hidden_dim")):  # DistilBERT: hidden_dim is the FFN
        out["hidden_dim"] = preset.intermediate
    put(_FFN, preset.intermediate)
    put(_LAYERS, preset.layers)
    put(_HEADS, preset.heads)
    put(_KV_HEADS, preset.kv_heads)
    for key in _KV_HEADS:  # None means "one KV head per query head" (Nemotron needs it spelled)
        if key in attrs and attrs[key] is None and any(k in attrs for k in _HEADS):
            out[key] = preset.heads
    put(_HEAD_DIM, preset.head_dim, allow_none=True)
    put(_PROJECTION, preset.hidden)
    _cap_experts(attrs, preset, out)
    experts = any(is_int(attrs.get(k)) for k in _EXPERTS)
    for key in _EXPERTS_PER_TOKEN:
        if is_int(attrs.get(key)) and attrs[key] > preset.experts_per_token:
            out[key] = preset.experts_per_token
        elif key in attrs and attrs[key] is None and experts:
            # declared but unset (DeepSeek-V2's default config routes to k=None): the preset's
            out[key] = preset.experts_per_token
    _cap_vocab(attrs, preset, out)
    if is_int(attrs.get("image_size")):
        out["image_size"] = preset.image_size
        patch: Any = attrs.get("patch_size")
        if is_int(patch) and (preset.image_size % patch or patch > preset.patch_size):
            out["patch_size"] = preset.patch_size
    if is_int(attrs.get("max_source_positions")):
        out["max_source_positions"] = preset.audio_positions
    sizes = attrs.get("hidden_sizes")
    if isinstance(sizes, (list, tuple)) and sizes and all(is_int(s) for s in sizes):
        step = max(preset.hidden // 4, 8)
        out["hidden_sizes"] = [step * 2**i for i in range(len(sizes))]
        if is_int(attrs.get("embedding_size")):
            out["embedding_size"] = step
    depths = attrs.get("depths")
    if isinstance(depths, (list, tuple)) and depths and all(is_int(d) for d in depths):
        out["depths"] = [1] * len(depths)
        heads = attrs.get("num_heads")
        if isinstance(heads, (list, tuple)) and len(heads) == len(depths):
            base = out.get("embed_dim", preset.hidden)
            out["num_heads"] = [
                max(1, (base * 2**i) // preset.head_dim) for i in range(len(depths))
            ]
    conv_dim = attrs.get("conv_dim")
    if isinstance(conv_dim, (list, tuple)) and conv_dim:
        out["conv_dim"] = [preset.hidden] * len(conv_dim)
    if is_int(attrs.get("window_size")) and "depths" in attrs:
        out["window_size"] = 4
    rope = attrs.get("rope_parameters")
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), (list, tuple)):
        sections = [int(s) for s in rope["mrope_section"]]
        half = preset.head_dim // 2
        scaled = [s * half // sum(sections) for s in sections]
        scaled[0] += half - sum(scaled)
        out["rope_parameters"] = {**rope, "mrope_section": scaled}
    per_layer = attrs.get("per_layer_config")
    if isinstance(per_layer, dict):
        out["per_layer_config"] = {
            k: v for k, v in per_layer.items() if is_int(k) and k < preset.layers
        }
    layer_types = attrs.get("layer_types")
    if isinstance(layer_types, (list, tuple)) and default_layers is not None:
        out["layer_types"] = first_layer_types(layer_types, preset.layers)
    _feature_overrides(attrs, preset, features, out)
    for key, value in attrs.items():
        if is_config(value):
            sub = _overrides(value, preset, features=features)
            sub["model_type"] = value.model_type
            out[key] = {**_plain_dict(value), **sub}
    return out


def _series_overrides(attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any]) -> None:
    """Time-series forecasters (Autoformer, Informer, Time Series Transformer) leave their
    horizon unset and build nothing without it: ``preset.seq_len`` steps ahead (the context
    defaults to the horizon), with one time feature, so that no input is zero-length, and
    Autoformer's decoder start (``label_length``, 10 by default) inside that context."""
    if "prediction_length" in attrs and attrs["prediction_length"] is None:
        out["prediction_length"] = preset.seq_len
        if is_int(attrs.get("label_length")) and attrs["label_length"] > preset.seq_len:
            out["label_length"] = max(1, preset.seq_len // 2)
        if is_int(attrs.get("num_time_features")) and attrs["num_time_features"] < 1:
            out["num_time_features"] = 1


def _feature_overrides(
    attrs: Mapping[str, Any], preset: SizePreset, features: Features, out: dict[str, Any]
) -> None:
    """Set the :class:`Features` the config has (see there); leave the others alone."""
    if features.partial_rotary is not None:
        rope = out.get("rope_parameters", attrs.get("rope_parameters"))
        if isinstance(rope, dict) and "partial_rotary_factor" in rope:
            out["rope_parameters"] = {**rope, "partial_rotary_factor": features.partial_rotary}
        elif is_int(attrs.get("rotary_dim")):  # GPT-J, CodeGen: rotated dims per head
            head_dim = out.get("n_embd", attrs.get("n_embd", preset.hidden)) // out.get(
                "n_head", attrs.get("n_head", preset.heads)
            )
            out["rotary_dim"] = max(2, int(head_dim * features.partial_rotary) // 2 * 2)
    if features.tie_embeddings is not None and "tie_word_embeddings" in attrs:
        out["tie_word_embeddings"] = features.tie_embeddings
    if features.sliding_window is not None and "sliding_window" in attrs:
        out["sliding_window"] = features.sliding_window
        if "use_sliding_window" in attrs:
            out["use_sliding_window"] = True
        if is_int(attrs.get("max_window_layers")):
            out["max_window_layers"] = 0
        layers = next((out[k] for k in _LAYERS if is_int(out.get(k))), None)
        layers = layers or next((attrs[k] for k in _LAYERS if is_int(attrs.get(k))), None)
        if isinstance(attrs.get("layer_types"), (list, tuple)) and layers:
            out["layer_types"] = [
                "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)
            ]


#: The keys :func:`scale_widths` changes: the widths of a layer, never its depth or inputs.
_WIDTH_KEYS = (*_WIDTH, *_FFN, *_HEADS, *_KV_HEADS, *_HEAD_DIM, *_PROJECTION, "hidden_dim")


def scale_widths(config: Any, preset: SizePreset) -> Any:
    """A copy of ``config`` (and its sub-configs) with every width, FFN size, head count and
    head size of ``preset`` (:func:`family_config`'s shrink, restricted to those keys), keeping
    its depth, vocabulary, image, audio and sequence sizes: the sizes its inputs depend on."""
    overrides = _width_overrides(config, preset)
    try:
        return type(config)(**{**_plain_dict(config), **overrides})
    except Exception:
        scaled = copy.deepcopy(config)
        _assign(scaled, overrides)
        return scaled


def _width_overrides(config: Any, preset: SizePreset) -> dict[str, Any]:
    full = _overrides(config, preset)
    out = {k: v for k, v in full.items() if k in _WIDTH_KEYS}
    if "rope_parameters" in full and "mrope_section" in str(full["rope_parameters"]):
        out["rope_parameters"] = full["rope_parameters"]  # sections follow the head size
    for key, value in vars(config).items():
        if is_config(value):
            sub = _width_overrides(value, preset)
            sub["model_type"] = value.model_type
            out[key] = {**_plain_dict(value), **sub}
    return out


def _depth_overrides(
    attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any], default_layers: Any
) -> None:
    for key in _LAYERS:
        if is_int(attrs.get(key)) and attrs[key] > preset.layers:
            out[key] = preset.layers
    layer_types = attrs.get("layer_types")
    if isinstance(layer_types, (list, tuple)) and default_layers is not None:
        out["layer_types"] = first_layer_types(layer_types, preset.layers)
    _cap_experts(attrs, preset, out)
    _cap_vocab(attrs, preset, out)


def first_layer_types(layer_types: Sequence[Any], layers: int) -> list[Any]:
    """The first ``layers`` of a per-layer pattern, the last one made the pattern's first
    softmax-attention kind when none is kept: hybrids put theirs late (Qwen3-Next: three linear
    attention layers, then full), and their cache needs one to run."""
    kept = list(layer_types)[:layers]
    attention = [k for k in layer_types if "attention" in str(k) and not str(k).startswith("lin")]
    if kept and attention and not set(kept) & set(attention):
        kept[-1] = attention[0]
    return kept


def _cap_experts(attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any]) -> None:
    """Cap the number of MoE experts at the preset's."""
    for key in _EXPERTS:
        if is_int(attrs.get(key)) and attrs[key] > preset.experts:
            out[key] = preset.experts


def _cap_vocab(attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any]) -> None:
    """Cap the vocabulary at the preset's, moving special token ids that fall outside it."""
    if is_int(attrs.get("vocab_size")) and attrs["vocab_size"] > preset.vocab:
        out["vocab_size"] = preset.vocab
        for key, value in attrs.items():
            special = key.endswith(("_token_id", "_token_index")) and is_int(value)
            if special and value >= preset.vocab:
                out[key] = preset.vocab - 1 - (value % 8)


def _width(config: Any) -> int:
    """The widest model width of ``config`` and its sub-configs."""
    widths = [getattr(config, k) for k in _WIDTH if is_int(getattr(config, k, None))]
    for value in vars(config).values():
        if is_config(value):
            widths.append(_width(value))
    return max(widths, default=0)


#: ``fit="depth"`` (the family's own widths) is tried only up to this width: wider models are
#: too slow to run on the emulated device in a sweep.
MAX_DEPTH_FIT_WIDTH = 1024


def _plain_dict(config: Any) -> dict[str, Any]:
    data: dict[str, Any] = config.to_dict()
    data.pop("transformers_version", None)
    return data


def family_config(
    model_type: str,
    *,
    preset: SizePreset = REALISTIC,
    fit: str = "preset",
    features: Features = NO_FEATURES,
) -> Any:
    """The config of ``model_type`` shrunk to ``preset`` (``fit="depth"``: only the depth,
    vocabulary and input lengths; the family's own widths are kept), with ``features`` set
    where the family has them.

    Raises :class:`FamilyBuildError` (stage ``"config"``) if the model type is unknown or its
    config class rejects the sizes.
    """
    from transformers import CONFIG_MAPPING

    try:
        config_class = CONFIG_MAPPING[model_type]
        default = config_class()
    except Exception as exc:  # any failure of a third-party constructor means "does not build"
        raise FamilyBuildError.failed(model_type, "config", exc) from exc
    if fit == "depth" and _width(default) > MAX_DEPTH_FIT_WIDTH:
        raise FamilyBuildError(
            model_type,
            "config",
            f"its own width {_width(default)} is above {MAX_DEPTH_FIT_WIDTH} (too slow to emulate)",
        )
    overrides = _overrides(default, preset, fit, features)
    try:
        return config_class(**overrides)
    except Exception as first:
        # Some config classes derive attributes in __init__ and reject them as arguments:
        # fall back to editing a default instance attribute by attribute.
        config = copy.deepcopy(default)
        try:
            _assign(config, overrides)
        except Exception:
            raise FamilyBuildError.failed(model_type, "config", first) from first
        return config


def variants_for(
    model_type: str,
    *,
    base: SizePreset = REALISTIC,
    variants: Sequence[SizePreset] = VARIANTS,
) -> list[SizePreset]:
    """The ``variants`` that build ``model_type`` differently from ``base``: another config
    (one KV head means nothing to a family without key/value head counts) or other inputs.
    Variants whose config does not build are left out; nothing is left when ``base`` does
    not build."""
    try:
        reference = _plain_dict(family_config(model_type, preset=base))
    except FamilyBuildError:
        return []
    found = []
    for variant in variants:
        try:
            config = _plain_dict(family_config(model_type, preset=variant))
        except FamilyBuildError:
            continue
        inputs = (variant.batch, variant.seq_len) != (base.batch, base.seq_len)
        if config != reference or inputs:
            found.append(variant)
    return found


def _assign(config: Any, overrides: Mapping[str, Any]) -> None:
    for key, value in overrides.items():
        current = getattr(config, key, None)
        if isinstance(value, dict) and is_config(current):
            _assign(current, {k: v for k, v in value.items() if k != "model_type"})
        else:
            setattr(config, key, value)
