"""Model families: a small, runnable instance of a Transformers ``model_type``, built from its config.

No checkpoint is downloaded. The family's config class is instantiated with its defaults and
then shrunk to one of two size presets:

- :data:`REALISTIC` (the default): sizes a Spyre deployment actually meets, so the layout rules
  of the device are exercised as they would be on a real checkpoint: hidden sizes and FFN sizes
  are multiples of 64 (one stick), ``head_dim`` is 64 (as in Llama-3.2-1B, SmolLM2, TinyLlama,
  GPT-2, BERT), grouped-query attention where the family has it, a vocabulary that is a multiple
  of 64, two layers.
- :data:`TINY`: the sizes of Transformers' own model testers (hidden 32, FFN 37, 4 heads of 8,
  vocabulary 99). They are *not* stick aligned: use them to see what the layout rules reject.

A preset also sets the input batch (``batch`` rows of ``seq_len`` tokens). :data:`VARIANTS`
are the realistic preset varied where adapters have been wrong before, for checks that run a
family more than once: one key/value head (multi-query attention: ``repeat_kv`` then returns
a stride-0 view), and odd sizes (a batch of 3, 13 tokens, a vocabulary that is not a multiple
of 64). :class:`Features` varies the config beyond sizes (partial rotary, tied embeddings,
sliding-window attention) where the family has the feature.

Composite (multimodal) configs carry sub-configs (``text_config``, ``vision_config``,
``audio_config``, ...); each is shrunk with the same preset.

A family *builds* when its model instantiates from the shrunk config and one eval forward on
the CPU succeeds with synthesised inputs (token ids, pixels, audio features or raw audio; a
composite model is tried text-only first, then with pixels). :func:`build_family` returns the
model, those inputs and the CPU reference output.

The compared output is ``logits`` for causal LMs, else ``last_hidden_state``, else the
floating-point top-level output with the most elements (a dual encoder's ``text_embeds``
rather than its 1x1 ``logits_per_image``: a cosine of one value is only its sign). A reference
no fp16 run could be judged against fails the build at stage ``"reference"``: fewer than
:data:`MIN_COMPARED_VALUES` values, or every value below fp16's smallest normal
(:data:`FP16_SMALLEST_NORMAL`: the random weights made the activations vanish, as in deep
convolutional stacks such as MobileNet).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from spyre_adapters.errors import SpyreAdaptersError
from spyre_adapters.main_output import LOGITS_FIRST, main_output_name, output_named

__all__ = [
    "MQA",
    "ODD_SIZES",
    "REALISTIC",
    "TINY",
    "VARIANTS",
    "BuiltFamily",
    "FP16_SMALLEST_NORMAL",
    "Features",
    "MIN_COMPARED_VALUES",
    "FamilyBuildError",
    "NO_FEATURES",
    "SizePreset",
    "build_family",
    "buildable_families",
    "candidate_families",
    "compared_output_name",
    "family_config",
    "judge_reference",
    "scale_widths",
    "variants_for",
]


@dataclass(frozen=True)
class SizePreset:
    """The sizes a family is shrunk to (``head_dim * heads == hidden``), and the input batch:
    ``batch`` rows of ``seq_len`` tokens (one image or audio clip per row)."""

    name: str
    hidden: int
    heads: int
    head_dim: int
    kv_heads: int
    intermediate: int
    layers: int
    vocab: int
    experts: int
    experts_per_token: int
    image_size: int
    patch_size: int
    audio_positions: int
    seq_len: int
    batch: int = 1


REALISTIC = SizePreset(
    name="realistic",
    hidden=256,
    heads=4,
    head_dim=64,
    kv_heads=2,
    intermediate=512,
    layers=2,
    vocab=1024,
    experts=4,
    experts_per_token=2,
    image_size=64,
    patch_size=16,
    audio_positions=32,
    seq_len=8,
)

TINY = SizePreset(
    name="tiny",
    hidden=32,
    heads=4,
    head_dim=8,
    kv_heads=2,
    intermediate=37,
    layers=2,
    vocab=99,
    experts=4,
    experts_per_token=2,
    image_size=32,
    patch_size=8,
    audio_positions=16,
    seq_len=7,
)


MQA = dataclasses.replace(REALISTIC, name="realistic-mqa", kv_heads=1)
"""The realistic sizes with one key/value head (multi-query attention)."""

ODD_SIZES = dataclasses.replace(REALISTIC, name="realistic-odd", vocab=1000, seq_len=13, batch=3)
"""The realistic widths with odd input and vocabulary sizes: 3 rows of 13 tokens, vocabulary
1000 (not a multiple of 64)."""

VARIANTS: tuple[SizePreset, ...] = (MQA, ODD_SIZES)
"""Variants of :data:`REALISTIC` a family is also checked at (see the module docstring)."""


@dataclass(frozen=True)
class Features:
    """Config features varied beyond sizes; ``None`` keeps the family's default, and a feature
    the family does not have is left alone.

    ``partial_rotary``: the fraction of each head rotated by RoPE (families with a partial
    rotary factor or a ``rotary_dim``). ``tie_embeddings``: the LM head shares the input
    embedding. ``sliding_window``: the window of sliding-window attention (families with a
    ``sliding_window``); where the family declares per-layer types, layers alternate sliding
    and full attention, starting with sliding.
    """

    partial_rotary: float | None = None
    tie_embeddings: bool | None = None
    sliding_window: int | None = None


NO_FEATURES = Features()


MIN_COMPARED_VALUES = 8
"""Fewest values a compared output may have: a cosine over fewer says little."""
FP16_SMALLEST_NORMAL = 2.0**-14
"""A reference whose every magnitude is below this vanishes in fp16: nothing to compare."""


class FamilyBuildError(SpyreAdaptersError):
    """A family did not build: ``stage`` is ``"config"``, ``"instantiate"``, ``"inputs"``,
    ``"forward"`` or ``"reference"`` (the CPU output cannot judge a device run; see the module
    docstring); ``reason`` is the underlying error in one line."""

    def __init__(self, model_type: str, stage: str, reason: str) -> None:
        self.model_type = model_type
        self.stage = stage
        self.reason = reason
        if stage == "reference":
            text = f"model_type {model_type!r} builds, but its CPU reference cannot judge a run"
        else:
            text = f"model_type {model_type!r} does not build from its config ({stage} failed)"
        super().__init__(f"{text}: {reason}")


@dataclass
class BuiltFamily:
    """A built family: the CPU model (fp32, eval mode), its inputs and the CPU reference output.

    ``fit`` is ``"preset"`` (every size of the preset) or ``"depth"`` (the family's own
    widths; see :func:`build_family`). ``kind`` is ``"causal-lm"`` (the output is the logits,
    compared by greedy top-1 at every position) or ``"base"`` (the output named
    ``output_name``, chosen as the module docstring says, compared by cosine).
    """

    model_type: str
    preset: SizePreset
    config: Any
    model: nn.Module
    inputs: dict[str, torch.Tensor]
    kind: str
    output_name: str
    reference: torch.Tensor
    options: dict[str, Any]
    fit: str = "preset"

    def run(self, model: nn.Module, device: str | torch.device = "cpu") -> torch.Tensor:
        """Run ``model`` on this family's inputs moved to ``device``; return the compared output
        (on the device it was produced on)."""
        dtype = _floating_dtype(model)
        feed = {
            name: (value.to(dtype) if value.is_floating_point() else value).to(device)
            for name, value in self.inputs.items()
        }
        with torch.no_grad():
            out = model(**feed, **self.options)
        return output_named(out, self.output_name)


# -- enumeration -------------------------------------------------------------------------------


def candidate_families() -> list[str]:
    """Every ``model_type`` of the installed Transformers that has a base model (or causal-LM)
    class, sorted. Whether each one *builds* is only known by trying: see
    :func:`buildable_families`."""
    from transformers.models.auto.configuration_auto import (  # type: ignore[attr-defined]
        CONFIG_MAPPING_NAMES,
    )
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_MAPPING_NAMES,
    )

    with_model = set(MODEL_MAPPING_NAMES) | set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    return sorted(mt for mt in CONFIG_MAPPING_NAMES if mt in with_model)


def buildable_families(
    families: Iterable[str] | None = None, *, preset: SizePreset = REALISTIC
) -> list[str]:
    """The families (default: :func:`candidate_families`) that build and run on the CPU."""
    found = []
    for model_type in candidate_families() if families is None else families:
        try:
            build_family(model_type, preset=preset)
        except FamilyBuildError:
            continue
        found.append(model_type)
    return found


# -- configs -----------------------------------------------------------------------------------

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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_config(value: object) -> bool:
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
    default_layers = next((attrs[k] for k in _LAYERS if _is_int(attrs.get(k))), None)
    if fit == "depth":
        _depth_overrides(attrs, preset, out, default_layers)
        _feature_overrides(attrs, preset, features, out)
        for key, value in attrs.items():
            if _is_config(value):
                sub = _overrides(value, preset, fit, features)
                sub["model_type"] = value.model_type
                out[key] = {**_plain_dict(value), **sub}
        return out

    def put(keys: tuple[str, ...], value: int, *, allow_none: bool = False) -> None:
        for key in keys:
            if key in attrs and (_is_int(attrs[key]) or (allow_none and attrs[key] is None)):
                out[key] = value

    put(_WIDTH, preset.hidden)
    if "dim" in attrs and _is_int(attrs.get("hidden_dim")):  # DistilBERT: hidden_dim is the FFN
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
    for key in _EXPERTS_PER_TOKEN:
        if _is_int(attrs.get(key)) and attrs[key] > preset.experts_per_token:
            out[key] = preset.experts_per_token
    _cap_vocab(attrs, preset, out)
    if _is_int(attrs.get("image_size")):
        out["image_size"] = preset.image_size
        patch: Any = attrs.get("patch_size")
        if _is_int(patch) and (preset.image_size % patch or patch > preset.patch_size):
            out["patch_size"] = preset.patch_size
    if _is_int(attrs.get("max_source_positions")):
        out["max_source_positions"] = preset.audio_positions
    sizes = attrs.get("hidden_sizes")
    if isinstance(sizes, (list, tuple)) and sizes and all(_is_int(s) for s in sizes):
        step = max(preset.hidden // 4, 8)
        out["hidden_sizes"] = [step * 2**i for i in range(len(sizes))]
        if _is_int(attrs.get("embedding_size")):
            out["embedding_size"] = step
    depths = attrs.get("depths")
    if isinstance(depths, (list, tuple)) and depths and all(_is_int(d) for d in depths):
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
    if _is_int(attrs.get("window_size")) and "depths" in attrs:
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
            k: v for k, v in per_layer.items() if _is_int(k) and k < preset.layers
        }
    layer_types = attrs.get("layer_types")
    if isinstance(layer_types, (list, tuple)) and default_layers is not None:
        out["layer_types"] = list(layer_types)[: preset.layers]
    _feature_overrides(attrs, preset, features, out)
    for key, value in attrs.items():
        if _is_config(value):
            sub = _overrides(value, preset, features=features)
            sub["model_type"] = value.model_type
            out[key] = {**_plain_dict(value), **sub}
    return out


def _feature_overrides(
    attrs: Mapping[str, Any], preset: SizePreset, features: Features, out: dict[str, Any]
) -> None:
    """Set the :class:`Features` the config has (see there); leave the others alone."""
    if features.partial_rotary is not None:
        rope = out.get("rope_parameters", attrs.get("rope_parameters"))
        if isinstance(rope, dict) and "partial_rotary_factor" in rope:
            out["rope_parameters"] = {**rope, "partial_rotary_factor": features.partial_rotary}
        elif _is_int(attrs.get("rotary_dim")):  # GPT-J, CodeGen: rotated dims per head
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
        if _is_int(attrs.get("max_window_layers")):
            out["max_window_layers"] = 0
        layers = next((out[k] for k in _LAYERS if _is_int(out.get(k))), None)
        layers = layers or next((attrs[k] for k in _LAYERS if _is_int(attrs.get(k))), None)
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
        if _is_config(value):
            sub = _width_overrides(value, preset)
            sub["model_type"] = value.model_type
            out[key] = {**_plain_dict(value), **sub}
    return out


def _depth_overrides(
    attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any], default_layers: Any
) -> None:
    for key in _LAYERS:
        if _is_int(attrs.get(key)) and attrs[key] > preset.layers:
            out[key] = preset.layers
    layer_types = attrs.get("layer_types")
    if isinstance(layer_types, (list, tuple)) and default_layers is not None:
        out["layer_types"] = list(layer_types)[: preset.layers]
    _cap_experts(attrs, preset, out)
    _cap_vocab(attrs, preset, out)


def _cap_experts(attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any]) -> None:
    """Cap the number of MoE experts at the preset's."""
    for key in _EXPERTS:
        if _is_int(attrs.get(key)) and attrs[key] > preset.experts:
            out[key] = preset.experts


def _cap_vocab(attrs: Mapping[str, Any], preset: SizePreset, out: dict[str, Any]) -> None:
    """Cap the vocabulary at the preset's, moving special token ids that fall outside it."""
    if _is_int(attrs.get("vocab_size")) and attrs["vocab_size"] > preset.vocab:
        out["vocab_size"] = preset.vocab
        for key, value in attrs.items():
            special = key.endswith(("_token_id", "_token_index")) and _is_int(value)
            if special and value >= preset.vocab:
                out[key] = preset.vocab - 1 - (value % 8)


def _width(config: Any) -> int:
    """The widest model width of ``config`` and its sub-configs."""
    widths = [getattr(config, k) for k in _WIDTH if _is_int(getattr(config, k, None))]
    for value in vars(config).values():
        if _is_config(value):
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
        raise FamilyBuildError(model_type, "config", _one_line(exc)) from exc
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
            raise FamilyBuildError(model_type, "config", _one_line(first)) from first
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
        if isinstance(value, dict) and _is_config(current):
            _assign(current, {k: v for k, v in value.items() if k != "model_type"})
        else:
            setattr(config, key, value)


# -- models and inputs -------------------------------------------------------------------------


def _model_class(model_type: str, config: Any) -> tuple[type[nn.Module], str]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_MAPPING,
    )

    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        try:
            causal: Any = MODEL_FOR_CAUSAL_LM_MAPPING
            found: type[nn.Module] = causal[type(config)]
            return found, "causal-lm"
        except (KeyError, ValueError, ImportError):
            pass
    mapping: Any = MODEL_MAPPING
    base: type[nn.Module] = mapping[type(config)]
    return base, "base"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _special_ids(config: Any) -> set[int]:
    ids: set[int] = set()
    for owner in [config, *(v for v in vars(config).values() if _is_config(v))]:
        for key, value in vars(owner).items():
            if key.endswith(("_token_id", "_token_index")) and _is_int(value):
                ids.add(value)
    return ids


def _vocab(config: Any) -> int:
    for owner in [config, getattr(config, "text_config", None), getattr(config, "decoder", None)]:
        if owner is not None and _is_int(getattr(owner, "vocab_size", None)):
            return int(owner.vocab_size)
    return 64


def _token_ids(config: Any, preset: SizePreset, generator: torch.Generator) -> torch.Tensor:
    vocab = _vocab(config)
    allowed = [i for i in range(min(vocab, 4096)) if i not in _special_ids(config)] or [0]
    pick = torch.randint(0, len(allowed), (preset.batch, preset.seq_len), generator=generator)
    return torch.tensor(allowed, dtype=torch.long)[pick]


def _vision_config(config: Any) -> Any:
    vision = getattr(config, "vision_config", None)
    return vision if vision is not None else config


def _pixels(config: Any, preset: SizePreset, generator: torch.Generator) -> torch.Tensor:
    vision = _vision_config(config)
    channels = getattr(vision, "num_channels", None) or 3
    size = getattr(vision, "image_size", preset.image_size)
    if isinstance(size, (list, tuple)):
        height, width = int(size[0]), int(size[-1])
    else:
        height = width = int(size) if _is_int(size) else preset.image_size
    return torch.randn(preset.batch, int(channels), height, width, generator=generator)


def _input_plans(
    model: nn.Module, config: Any, preset: SizePreset
) -> list[tuple[str, Callable[[torch.Generator], dict[str, torch.Tensor]]]]:
    """Candidate input sets, most specific first; the first one the CPU forward accepts wins."""
    main = getattr(model, "main_input_name", "input_ids")
    params = inspect.signature(model.forward).parameters
    plans: list[tuple[str, Callable[[torch.Generator], dict[str, torch.Tensor]]]] = []

    def text(gen: torch.Generator) -> dict[str, torch.Tensor]:
        ids = _token_ids(config, preset, gen)
        feed: dict[str, torch.Tensor] = {"input_ids": ids}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            feed["decoder_input_ids"] = ids.clone()
        return feed

    def pixels(gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {"pixel_values": _pixels(config, preset, gen)}

    def text_and_pixels(gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {**text(gen), **pixels(gen)}

    def features(gen: torch.Generator) -> dict[str, torch.Tensor]:
        bins: Any = getattr(config, "num_mel_bins", None) or getattr(config, "feature_size", 80)
        frames = 2 * int(getattr(config, "max_source_positions", preset.audio_positions))
        feed = {"input_features": torch.randn(preset.batch, int(bins), frames, generator=gen)}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            feed["decoder_input_ids"] = _token_ids(config, preset, gen)
        return feed

    def raw_audio(gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {"input_values": torch.randn(preset.batch, 4000, generator=gen)}

    if main == "input_ids" or "input_ids" in params:
        plans.append(("text", text))
    if main == "pixel_values" or "pixel_values" in params:
        plans.append(("pixels", pixels))
        if "input_ids" in params:
            plans.append(("text+pixels", text_and_pixels))
    if main == "input_features" or "input_features" in params:
        plans.append(("audio-features", features))
    if main == "input_values" or "input_values" in params:
        plans.append(("raw-audio", raw_audio))
    main_first = {
        "input_ids": "text",
        "pixel_values": "pixels",
        "input_features": "audio-features",
        "input_values": "raw-audio",
    }.get(main)
    plans.sort(key=lambda plan: plan[0] != main_first)
    return plans


def compared_output_name(out: Any, kind: str) -> str:
    """The name of the output compared for a family of ``kind`` (see the module docstring):
    :func:`spyre_adapters.main_output.main_output_name`, logits first for causal LMs only."""
    return main_output_name(out, LOGITS_FIRST if kind == "causal-lm" else ("last_hidden_state",))


def judge_reference(reference: torch.Tensor, output_name: str) -> str | None:
    """Why ``reference`` cannot judge an fp16 device run, or None."""
    count = reference.numel()
    if count < MIN_COMPARED_VALUES:
        return (
            f"the compared output {output_name!r} has {count} value(s) "
            f"(fewer than {MIN_COMPARED_VALUES}): a comparison would say next to nothing"
        )
    largest = float(reference.detach().abs().max())
    if largest < FP16_SMALLEST_NORMAL:
        return (
            f"every value of the compared output {output_name!r} is below fp16's smallest "
            f"normal (largest magnitude {largest:.3g}): with random weights its activations "
            "vanish, so no fp16 run can be judged against it"
        )
    return None


def _floating_dtype(model: nn.Module) -> torch.dtype:
    for param in model.parameters():
        if param.is_floating_point():
            return param.dtype
    return torch.float32


def build_family(
    model_type: str,
    *,
    preset: SizePreset = REALISTIC,
    seed: int = 0,
    features: Features = NO_FEATURES,
) -> BuiltFamily:
    """Build ``model_type`` at ``preset`` sizes (with ``features``) with seeded random weights,
    find inputs its forward accepts, and record the CPU reference output (fp32, eval mode).

    When the family does not build with every size of the preset (its config derives shapes
    the shrink does not know about), it is built again keeping its own widths and shrinking
    only its depth, vocabulary and input lengths (``fit`` is then ``"depth"``), if those
    widths are at most :data:`MAX_DEPTH_FIT_WIDTH`. Raises :class:`FamilyBuildError` naming
    the stage that failed with the full preset.
    """
    try:
        return _build(model_type, preset, seed, "preset", features)
    except FamilyBuildError as first:
        if model_type not in _known_model_types():
            raise
        try:
            return _build(model_type, preset, seed, "depth", features)
        except FamilyBuildError:
            raise first from None


def _known_model_types() -> set[str]:
    from transformers import CONFIG_MAPPING

    return set(CONFIG_MAPPING.keys())


def _build(
    model_type: str, preset: SizePreset, seed: int, fit: str, features: Features
) -> BuiltFamily:
    config = family_config(model_type, preset=preset, fit=fit, features=features)
    try:
        model_class, kind = _model_class(model_type, config)
    except Exception as exc:
        raise FamilyBuildError(model_type, "instantiate", _one_line(exc)) from exc
    torch.manual_seed(seed)
    try:
        model = model_class(config).eval()
    except Exception as exc:
        raise FamilyBuildError(model_type, "instantiate", _one_line(exc)) from exc
    try:
        plans = _input_plans(model, config, preset)
    except Exception as exc:
        raise FamilyBuildError(model_type, "inputs", _one_line(exc)) from exc
    if not plans:
        main = getattr(model, "main_input_name", "?")
        raise FamilyBuildError(model_type, "inputs", f"no input synthesis for main input {main!r}")
    # No KV cache: one prefill forward is what is compared, and hybrid (linear-attention)
    # caches reject being queried before any attention layer has run.
    options: dict[str, Any] = (
        {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    )
    first_error: BaseException | None = None
    unjudgeable_reason: str | None = None
    for _name, plan in plans:
        inputs = plan(torch.Generator().manual_seed(seed))
        try:
            with torch.no_grad():
                out = model(**inputs, **options)
            output_name = compared_output_name(out, kind)
            reference = output_named(out, output_name)
        except Exception as exc:
            first_error = first_error or exc
            continue
        if not reference.is_floating_point():
            first_error = first_error or TypeError(
                f"the compared output {output_name!r} is not floating point"
            )
            continue
        unjudgeable = judge_reference(reference, output_name)
        if unjudgeable is not None:
            unjudgeable_reason = unjudgeable_reason or unjudgeable
            continue
        return BuiltFamily(
            model_type=model_type,
            preset=preset,
            config=config,
            model=model,
            inputs=inputs,
            kind=kind if output_name == "logits" else "base",
            output_name=output_name,
            reference=reference.detach().float(),
            options=options,
            fit=fit,
        )
    if unjudgeable_reason is not None:
        raise FamilyBuildError(model_type, "reference", unjudgeable_reason)
    assert first_error is not None
    raise FamilyBuildError(model_type, "forward", _one_line(first_error))
