"""The models the odd-size probe builds: sizes, kinds of model, configs and the CPU forward.

Used by ``benchmarks/probe_odd_sizes.py`` (see its docstring for what each kind sets): the
sizes no tester uses, a :class:`Kind` per auto mapping with the inputs its forward gets, the
config of a type with the sizes set as given or fitted into its sub-configs, and
:func:`cpu_run`, the first attempt that builds and runs on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

if TYPE_CHECKING:
    from torch import Tensor

SIZES: dict[str, Any] = {
    "hidden_size": 40,
    "intermediate_size": 72,
    "num_attention_heads": 5,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
}
ENCODER_DECODER_SIZES: dict[str, Any] = {
    "d_model": 40,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_layers": 2,
    "num_encoder_layers": 2,
    "num_decoder_layers": 2,
    "encoder_attention_heads": 5,
    "decoder_attention_heads": 5,
    "num_encoder_attention_heads": 5,
    "num_decoder_attention_heads": 5,
    "num_heads": 5,
    "encoder_ffn_dim": 72,
    "decoder_ffn_dim": 72,
    "d_ff": 72,
    "d_kv": 8,
}
LAYER_KEYS = ("num_hidden_layers", "num_layers", "encoder_layers", "decoder_layers")
"""The layer counts a hierarchical config may count its stages with (left alone there)."""
CLASSIFIER_SIZES: dict[str, Any] = {"num_labels": 37}
IMAGE_SIDES = (36, 40)
"""The image sizes tried, in order: the first whose model builds and runs on the CPU is probed."""
IMAGE_SIZES: dict[str, Any] = {
    "patch_size": 4,
    "embed_dim": 40,
    "embedding_size": 24,
    "window_size": 2,
}
STAGE_WIDTH = 40
"""Stage ``i`` of a hierarchical vision model is ``STAGE_WIDTH * (i + 1)`` channels wide."""
AUDIO_SAMPLES = 5000
"""Raw audio: 15 frames of a 400-sample window moved by 320 (wav2vec2's feature encoder)."""
AUDIO_FRAMES = 30
"""Feature frames: an encoder that checks its input length halves it (Whisper: 15 positions)."""
AUDIO_SIZES: dict[str, Any] = {
    "max_source_positions": AUDIO_FRAMES // 2,
    "max_length": AUDIO_FRAMES,
    "conv_dim": 40,
    "num_conv_pos_embedding_groups": 5,
    "classifier_proj_size": 24,
}
FEATURE_BINS = ("num_mel_bins", "feature_projection_input_dim", "input_feat_per_channel")
PROMPT = [[5, 17, 42, 7, 99, 3, 64, 12, 201]]
DECODER_PROMPT = [[2, 30, 11, 77, 6, 150, 9]]
MEMORY_GIB = 6.0


@dataclass(frozen=True)
class Kind:
    """A kind of model: the types of ``mapping`` (a ``MODEL_FOR_*_MAPPING_NAMES`` of
    ``transformers.models.auto.modeling_auto``) built with ``auto_class``; ``attempts`` are the
    sizes tried in order (the first whose model builds and runs on the CPU is probed), set
    where the config has them when ``fit`` (else passed as given); ``inputs`` gives the
    candidate inputs of a config built with an attempt's sizes, for a model with a main input
    name; the first the CPU forward accepts wins."""

    name: str
    mapping: str
    auto_class: str
    attempts: tuple[dict[str, Any], ...]
    inputs: Callable[[Any, Mapping[str, Any], str], list[dict[str, Tensor]]]
    fit: bool = True


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(value: object) -> TypeGuard[list[int] | tuple[int, ...]]:
    """A non-empty list (or tuple) of ints: one per stage, or both sides of an image."""
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_int(v) for v in value)


def _is_config(value: object) -> bool:
    """A Transformers config (a sub-config of a composite one, say)."""
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def _sub_configs(config: Any) -> list[Any]:
    """The sub-configs of a composite config (text, vision, audio, encoder, decoder)."""
    return [value for value in vars(config).values() if _is_config(value)]


def _find(config: Any, keys: tuple[str, ...]) -> Any:
    """The first of ``keys`` set in ``config``, else in its sub-configs; ``None`` if none."""
    for owner in (config, *_sub_configs(config)):
        for key in keys:
            value = getattr(owner, key, None)
            if value is not None:
                return value
    return None


def _has(config: Any, key: str) -> bool:
    """``config`` stores ``key``, or every config computes it (``num_labels``); a property of
    its own class is not set (ProphetNet's ``num_hidden_layers`` refuses to be)."""
    from transformers import PreTrainedConfig

    return key in vars(config) or isinstance(getattr(PreTrainedConfig, key, None), property)


def _counts_stages(attrs: Mapping[str, Any], key: str) -> bool:
    """The count ``key`` of a hierarchical config is its number of stages (ConvNeXt's
    ``num_stages``, SegFormer's ``num_encoder_blocks``): a layer count that stays, as the
    stages do."""
    stages = attrs.get("depths")
    return _int_list(stages) and attrs.get(key) == len(stages)


def _fitted(default: Any, sizes: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor arguments that set ``sizes`` where ``default`` (a config) has the key,
    under the name it stores it (not an alias), an int given for a list of ints as that many
    copies; a per-layer list of layer types cut to the layers kept; per-stage lists as
    :func:`_stages` says; sub-configs the same way, as dicts."""
    aliases: Mapping[str, str] = getattr(type(default), "attribute_map", {})
    attrs = vars(default)
    out: dict[str, Any] = {}
    for key, value in sizes.items():
        stored = aliases.get(key, key)
        if not _has(default, stored) or (key in LAYER_KEYS and _counts_stages(attrs, stored)):
            continue
        current = attrs.get(stored)
        out[stored] = [value] * len(current) if _int_list(current) and _is_int(value) else value
    if isinstance(attrs.get("layer_types"), list):
        out["layer_types"] = _first_layer_types(attrs["layer_types"])
    per_layer = _per_layer(default, sizes)
    if per_layer is not None:
        out["per_layer_config"] = per_layer
    out.update(_stages(attrs))
    for key, sub in attrs.items():
        if _is_config(sub):
            plain = {k: v for k, v in sub.to_dict().items() if k != "transformers_version"}
            out[key] = {**plain, **_fitted(sub, sizes), "model_type": sub.model_type}
    return out


def _per_layer(default: Any, sizes: Mapping[str, Any]) -> dict[str, Any] | None:
    """A config's per-layer overrides (Transformers' heterogeneous ``per_layer_config``, keyed
    by layer index: Gemma 4's full-attention layers have their own ``head_dim``) for the
    layers kept (:func:`_first_layer_types`: the first ones and the last), re-indexed, with
    the sizes set in them too; ``None`` when the config has none."""
    table = default.to_dict().get("per_layer_config")
    if not isinstance(table, dict) or not table:
        return None
    attrs = vars(default)
    layer_types = attrs.get("layer_types")
    total = len(layer_types) if isinstance(layer_types, list) else attrs.get("num_hidden_layers")
    if not _is_int(total):
        return None
    layers = SIZES["num_hidden_layers"]
    kept = list(range(total)) if total <= layers else [*range(layers - 1), total - 1]
    by_index = {int(index): entry for index, entry in table.items()}
    return {
        str(new): {key: sizes.get(key, value) for key, value in by_index[old].items()}
        for new, old in enumerate(kept)
        if isinstance(by_index.get(old), dict)
    }


def _first_layer_types(layer_types: list[Any]) -> list[Any]:
    """A per-layer pattern cut to the layers kept, the last one of the pattern's last kind:
    patterns end a period with full attention (after sliding or linear layers), and some
    configs refuse a model without it."""
    layers = SIZES["num_hidden_layers"]
    if len(layer_types) <= layers:
        return layer_types
    return [*layer_types[: layers - 1], layer_types[-1]]


def _stages(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Per-stage lists of a hierarchical vision config: widths (``hidden_sizes``, a list
    ``embed_dim``) of :data:`STAGE_WIDTH` steps, two blocks a stage (``depths``), and heads of
    8 (``num_heads``, ``num_attention_heads``) of those widths, or of an ``embed_dim`` of
    :data:`STAGE_WIDTH` doubled at every stage when no width list is set."""
    out: dict[str, Any] = {}
    for key in ("hidden_sizes", "embed_dim"):
        if _int_list(attrs.get(key)):
            out[key] = [STAGE_WIDTH * (i + 1) for i in range(len(attrs[key]))]
    if _int_list(attrs.get("depths")):
        out["depths"] = [SIZES["num_hidden_layers"]] * len(attrs["depths"])
    for key in ("num_heads", "num_attention_heads"):
        if not _int_list(attrs.get(key)):
            continue
        count = len(attrs[key])
        doubled = [STAGE_WIDTH * 2**i for i in range(count)]
        widths = out.get("hidden_sizes") or out.get("embed_dim") or doubled
        if len(widths) == count:
            out[key] = [width // SIZES["head_dim"] for width in widths]
    return out


def _config(model_type: str, sizes: Mapping[str, Any], fit: bool) -> Any:
    """The config of ``model_type`` with ``sizes`` set where it has them (``fit``) or given."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    return config_class(**(_fitted(config_class(), sizes) if fit else sizes))


def _model(kind: Kind, model_type: str, config: Any) -> Any:
    """The seeded model of ``kind`` for ``config``: the first class of the mapping where it
    names several (DeiT with and without a distillation head), as a checkpoint's would say."""
    import torch
    import transformers
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, kind.mapping)[model_type]
    if not isinstance(names, str) and not config.architectures:
        config.architectures = [names[0]]
    torch.manual_seed(0)
    return getattr(transformers, kind.auto_class).from_config(config).eval()


def _randn(*shape: int) -> Tensor:
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _token_inputs(config: Any, sizes: Mapping[str, Any], main: str) -> list[dict[str, Tensor]]:
    import torch

    return [{main: torch.tensor(PROMPT)}]


def _seq2seq_inputs(config: Any, sizes: Mapping[str, Any], main: str) -> list[dict[str, Tensor]]:
    import torch

    return [{main: torch.tensor(PROMPT), "decoder_input_ids": torch.tensor(DECODER_PROMPT)}]


def _image_inputs(config: Any, sizes: Mapping[str, Any], main: str) -> list[dict[str, Tensor]]:
    """Pixels of the config's channels at the attempt's image size, then token ids (a model
    of pixel tokens: ImageGPT)."""
    channels = _find(config, ("num_channels",)) or 3
    side = sizes["image_size"]
    return [{main: _randn(1, channels, side, side)}, *_token_inputs(config, sizes, main)]


def _audio_inputs(config: Any, sizes: Mapping[str, Any], main: str) -> list[dict[str, Tensor]]:
    """Raw audio, then feature frames as ``[frames, bins]`` and as ``[bins, frames]``."""
    bins = _find(config, FEATURE_BINS)
    layouts: list[tuple[int, ...]] = [(AUDIO_SAMPLES,)]
    if _is_int(bins):
        layouts += [(AUDIO_FRAMES, bins), (bins, AUDIO_FRAMES)]
    return [{main: _randn(1, *layout)} for layout in layouts]


def _attempts(*sizes: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """``sizes``, then each with a key/value head per query head, for configs that refuse one
    (ESMC has no grouped-query attention)."""
    heads = SIZES["num_attention_heads"]
    return (*sizes, *({**each, "num_key_value_heads": heads} for each in sizes))


def _kinds() -> dict[str, Kind]:
    text = {**SIZES, **ENCODER_DECODER_SIZES, "embedding_size": SIZES["hidden_size"]}
    image = [{**text, **CLASSIFIER_SIZES, **IMAGE_SIZES, "image_size": s} for s in IMAGE_SIDES]
    audio = {**text, **CLASSIFIER_SIZES, **AUDIO_SIZES}
    kinds = (
        Kind(
            "causal-lm",
            "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
            "AutoModelForCausalLM",
            (SIZES,),
            _token_inputs,
            fit=False,
        ),
        Kind(
            "masked-lm",
            "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
            "AutoModelForMaskedLM",
            _attempts(text),
            _token_inputs,
        ),
        Kind(
            "seq2seq-lm",
            "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
            "AutoModelForSeq2SeqLM",
            _attempts(text),
            _seq2seq_inputs,
        ),
        Kind(
            "image-classification",
            "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
            "AutoModelForImageClassification",
            _attempts(*image),
            _image_inputs,
        ),
        Kind(
            "audio-classification",
            "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
            "AutoModelForAudioClassification",
            _attempts(audio),
            _audio_inputs,
        ),
    )
    return {kind.name: kind for kind in kinds}


KINDS = _kinds()


class CpuRun(NamedTuple):
    """The CPU forward a type is probed with: the model, its inputs, its logits, the index of
    the attempt (of its kind's ``attempts``) it was built with, whether its sizes were fitted
    into sub-configs, and the top-k choices the forward made
    (:func:`spyre_sim.selections.recording`), to replay on the device."""

    model: Any
    inputs: dict[str, Tensor]
    logits: Tensor
    attempt: int
    fitted: bool
    choices: list[Any]


def _tries(kind: Kind) -> list[tuple[int, dict[str, Any], bool]]:
    """(attempt, sizes, fit) in the order tried: ``kind``'s attempts as it sets them, then,
    for a kind that passes its sizes as given (``causal-lm``), the same attempts set only where
    the config or a sub-config has the key (a composite config, Gemma 3's or Llama 4's, keeps
    its text and vision configs at full size when given the sizes at its top)."""
    tries = [(attempt, sizes, kind.fit) for attempt, sizes in enumerate(kind.attempts)]
    if not kind.fit:
        tries += [(attempt, sizes, True) for attempt, sizes in enumerate(kind.attempts)]
    return tries


def cpu_run(kind: Kind, model_type: str) -> CpuRun:
    """The forward of the first of :func:`_tries` that builds and runs on the CPU, with the
    first of its candidate inputs the model accepts. When none does, the first error, unless
    that was running out of memory (a composite left at full size) and a try with the sizes
    fitted into its sub-configs failed otherwise: that error says more."""
    import gc

    import torch

    from spyre_sim.selections import recording

    first: Exception | None = None
    fitted: Exception | None = None
    model: Any = None
    for attempt, sizes, fit in _tries(kind):
        retried = fit and not kind.fit
        # a failed try's model (billions of weights at full size) must not outlive it: neither
        # through this name nor through a kept error's traceback
        model = None
        gc.collect()
        try:
            config = _config(model_type, sizes, fit)
            model = _model(kind, model_type, config)
            candidates = kind.inputs(config, sizes, model.main_input_name)
        except Exception as error:  # any failure of the stock config or model is the outcome
            first = first or error.with_traceback(None)
            fitted = fitted or (error.with_traceback(None) if retried else None)
            continue
        for inputs in candidates:
            try:
                with recording() as choices, torch.no_grad():
                    logits = model(**inputs).logits.float()
                return CpuRun(model, inputs, logits, attempt, retried, choices)
            except Exception as error:  # a layout the model rejects: the next one
                first = first or error.with_traceback(None)
                fitted = fitted or (error.with_traceback(None) if retried else None)
    assert first is not None
    if fitted is not None and _out_of_memory(first):
        raise fitted
    raise first


def _out_of_memory(error: Exception) -> bool:
    return isinstance(error, MemoryError) or "can't allocate memory" in str(error)


def cap_memory(gib: float) -> None:
    """Make an allocation beyond ``gib`` GiB of data fail in this process instead of the
    machine running out (a composite config left at its full size builds billions of weights)."""
    import resource

    limit = int(gib * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
