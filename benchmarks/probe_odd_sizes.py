"""Every model type of a kind of the installed Transformers at sizes no tester uses, on the device.

Builds each model type of a kind's auto mapping from its config at odd sizes (hidden 40, five
heads of 8, one key/value head, intermediate 72, two layers; stock initialisation, vocabulary
256), runs one forward on the CPU, prepares it with the resolved adapters at ``--stack``, runs
the same forward on the emulated device and compares the logits. Each type runs in a process
of its own, killed after ``--timeout`` seconds.

Kinds (``--kind``, repeatable or a comma list; default ``causal-lm``), the inputs the forward
gets and the sizes each sets beyond the common ones:

- ``causal-lm`` (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``): token ids. Every size is passed to
  the config as given, as this probe always has (a composite's constructor may route them to
  its text config: Fuyu's does); a config that does not build or run so (a composite that
  keeps its text and vision configs at full size: Gemma 3, Llama 4, Qwen3.5) is tried again
  with the sizes set where it or a sub-config has them, as the other kinds set them (the
  result says ``fitted``).
- ``masked-lm`` (``MODEL_FOR_MASKED_LM_MAPPING_NAMES``): token ids.
- ``seq2seq-lm`` (``MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES``): token ids and decoder token
  ids of another length.
- ``image-classification`` (``MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES``): pixels of the
  config's channels, 36 x 36 in patches of 4 (40 x 40 when 36 does not build or run); the
  stages of hierarchical models 40, 80, 120, ... wide (Swin-like ones, whose width doubles by
  stage, from an embedding of 40) with heads of 8 and two blocks each, attention windows of 2
  (the last stage of a 36-pixel Swin is 2 x 2).
- ``audio-classification`` (``MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES``): the model's
  main input (``input_values`` or ``input_features``) as 5000 samples of raw audio (15 frames
  of 320) or 30 frames of its feature bins, in the first layout the CPU forward accepts;
  feature encoders 40 wide, positional convolutions in groups of 8 channels.

The kinds but ``causal-lm`` also set the encoder and decoder sizes (``d_model``,
``encoder_layers``, ``d_kv``, ...), embeddings as wide as the hidden size (SqueezeBERT needs
it; images: a stem of 24) and 37 labels for the classifiers. They set a key only where the
config (or a sub-config: text, vision, audio, encoder, decoder) has it, in its form (both sides
of an image, say); a config that refuses one key/value head is built with one per query head
(the result's ``attempt`` says which of the kind's sizes in the JSON ran). A composite config
that does not build is a ``cpu-error``.

``--generate`` (causal LMs) also decodes 10 greedy tokens of a batch of two on both sides: the
prompt, and the prompt with its first three tokens as left padding (cache, masks and position
ids as a served batch has them). The tokens must agree up to the first step where the CPU's
two best scores are a tie (:func:`spyre_adapters.agreement.decoding`); the line shows each
row (``same 10 tokens``, ``differs at step 4 (a tie)``), and a row that differs elsewhere
makes the type a ``mismatch`` (or ``precision``, below).

Outcomes per type: ``match`` (the logits agree by :func:`spyre_adapters.agreement.compare`:
cosine at least 0.99 and the CPU's greedy token at every position the CPU decides),
``mismatch`` (it ran, the numbers differ: a silent wrong answer unless the run counted a
miscompile or an emulator limit, which the line then names), ``precision`` (it would be a
mismatch, but the device decided selections inside the model, a router's top-k, between
values within one DL16 step (``rounding_ties``: op and rows), and run again with the CPU's
choice at those rows (``replay``, :mod:`spyre_sim.selections`) the forward and the decoding
agree with the CPU's: rounding chose other experts, and that was the whole difference),
``raise`` (the device or an adapter raised: the error's
gap when it has one), ``cpu-error`` (the config does not build or run on the CPU at these
sizes, or needs more than ``--memory`` GiB, or its logits cannot judge an fp16 run: every one
below fp16's smallest normal, as the activations of deep random CNNs such as MobileNet vanish),
``timeout``, ``crash`` (the worker died).

    python benchmarks/probe_odd_sizes.py --stack 2026.09 --json probe.json
    python benchmarks/probe_odd_sizes.py --types llama,beam,ergo
    python benchmarks/probe_odd_sizes.py --generate --types llama,qwen2,mamba
    python benchmarks/probe_odd_sizes.py --kind masked-lm,image-classification --types bert,vit
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
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
    out.update(_stages(attrs))
    for key, sub in attrs.items():
        if _is_config(sub):
            plain = {k: v for k, v in sub.to_dict().items() if k != "transformers_version"}
            out[key] = {**plain, **_fitted(sub, sizes), "model_type": sub.model_type}
    return out


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
    """The CPU forward a type is probed with: the model, its inputs, its logits, and the index
    of the attempt (of its kind's ``attempts``) it was built with."""

    model: Any
    inputs: dict[str, Tensor]
    logits: Tensor
    attempt: int
    fitted: bool


def _tries(kind: Kind) -> list[tuple[int, dict[str, Any], bool]]:
    """(attempt, sizes, fit) in the order tried: ``kind``'s attempts as it sets them, then,
    for a kind that passes its sizes as given (``causal-lm``), the same attempts set only where
    the config or a sub-config has the key (a composite config, Gemma 3's or Llama 4's, keeps
    its text and vision configs at full size when given the sizes at its top)."""
    tries = [(attempt, sizes, kind.fit) for attempt, sizes in enumerate(kind.attempts)]
    if not kind.fit:
        tries += [(attempt, sizes, True) for attempt, sizes in enumerate(kind.attempts)]
    return tries


def _cpu_run(kind: Kind, model_type: str) -> CpuRun:
    """The forward of the first of :func:`_tries` that builds and runs on the CPU, with the
    first of its candidate inputs the model accepts; the first error when none does."""
    import torch

    first: Exception | None = None
    for attempt, sizes, fit in _tries(kind):
        try:
            config = _config(model_type, sizes, fit)
            model = _model(kind, model_type, config)
            candidates = kind.inputs(config, sizes, model.main_input_name)
        except Exception as error:  # any failure of the stock config or model is the outcome
            first = first or error
            continue
        for inputs in candidates:
            try:
                with torch.no_grad():
                    logits = model(**inputs).logits.float()
                return CpuRun(model, inputs, logits, attempt, fit and not kind.fit)
            except Exception as error:  # a layout the model rejects: the next one
                first = first or error
    assert first is not None
    raise first


def _cap_memory(gib: float) -> None:
    """Make an allocation beyond ``gib`` GiB of data fail in this process instead of the
    machine running out (a composite config left at its full size builds billions of weights)."""
    import resource

    limit = int(gib * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


#: New tokens of the greedy decoding ``--generate`` compares.
DECODE_STEPS = 10


class CpuDecode(NamedTuple):
    """A greedy decoding on the CPU: the batch it started from (the prompt, and the prompt
    with its first three tokens as left padding), the scores of each step, the new tokens and
    the top-k choices it made (:func:`spyre_sim.selections.recording`)."""

    feed: dict[str, Tensor]
    scores: tuple[Tensor, ...]
    tokens: Tensor
    choices: list[Any]


def _decode_feed(inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
    import torch

    ids = inputs["input_ids"]
    padded = ids.clone()
    padded[:, :3] = SIZES["pad_token_id"]
    mask = torch.ones_like(ids)
    return {
        "input_ids": torch.cat([ids, padded]),
        "attention_mask": torch.cat([mask, (torch.arange(ids.shape[1]) >= 3).long()[None]]),
    }


def _generate(model: Any, feed: Mapping[str, Tensor], **extra: Any) -> Any:
    import torch

    with torch.no_grad():
        return model.generate(
            **feed,
            max_new_tokens=DECODE_STEPS,
            min_new_tokens=DECODE_STEPS,
            do_sample=False,
            pad_token_id=SIZES["pad_token_id"],
            **extra,
        )


def _cpu_decode(model: Any, inputs: Mapping[str, Tensor]) -> CpuDecode:
    from spyre_sim.selections import recording

    feed = _decode_feed(inputs)
    with recording() as choices:
        out = _generate(model, feed, output_scores=True, return_dict_in_generate=True)
    prompt = feed["input_ids"].shape[1]
    return CpuDecode(feed, tuple(out.scores), out.sequences[:, prompt:], choices)


def _replayed(
    model: Any,
    stack: str,
    feed: Mapping[str, Tensor],
    expected: Tensor,
    choices: list[Any],
    decode: CpuDecode | None,
) -> dict[str, Any]:
    """The device's forward (and decoding) again, with the CPU's top-k choices at the rows
    rounding tied (:func:`spyre_sim.selections.replaying`): whether that alone makes them
    agree with the CPU."""
    import torch

    import spyre_sim
    from spyre_adapters.agreement import compare, decoding
    from spyre_sim.selections import replaying

    with spyre_sim.use_stack(stack), torch.no_grad():
        with replaying(choices) as forward_replay:
            got = model(**feed).logits.cpu().float()
        forward = compare(expected, got, logits=True)
        found: dict[str, Any] = {
            "rows": forward_replay.replaced,
            "aligned": forward_replay.aligned,
            "cosine": round(forward.cosine, 6),
            "matches": forward.matches and forward_replay.aligned,
        }
        if decode is not None:
            on_device = {name: value.to("spyre") for name, value in decode.feed.items()}
            prompt = decode.feed["input_ids"].shape[1]
            with replaying(decode.choices) as decode_replay:
                tokens = _generate(model, on_device).cpu()[:, prompt:]
            rows = decoding(decode.scores, decode.tokens, tokens)
            found["rows"] += decode_replay.replaced
            found["aligned"] = found["aligned"] and decode_replay.aligned
            found["decode"] = [row.describe() for row in rows]
            found["matches"] = (
                found["matches"] and decode_replay.aligned and all(r.matches for r in rows)
            )
    return found


def _one(kind: Kind, model_type: str, stack: str, generate: bool = False) -> dict[str, Any]:
    """The probe of one type of ``kind``, in this process; with ``generate`` (causal LMs), also
    a greedy decoding of a batch with a left-padded row, judged by
    :func:`spyre_adapters.agreement.decoding`."""
    import warnings

    warnings.simplefilter("ignore")
    import torch

    import spyre_adapters
    import spyre_sim
    from spyre_adapters.agreement import compare, decoding
    from spyre_adapters.enablement.families import judge_reference
    from spyre_sim import telemetry

    result: dict[str, Any] = {"type": model_type, "kind": kind.name, "stack": stack}
    try:
        model, inputs, expected, attempt, fitted = _cpu_run(kind, model_type)
    except Exception as error:  # any failure of the stock model is its outcome
        return {
            **result,
            "outcome": "cpu-error",
            "detail": f"{type(error).__name__}: {error}"[:300],
        }
    result["attempt"] = attempt
    if fitted:
        result["fitted"] = True
    result["inputs"] = {name: list(value.shape) for name, value in inputs.items()}
    unjudgeable = judge_reference(expected, "logits")
    if unjudgeable is not None:  # a reference no fp16 run can match: nothing to compare
        return {**result, "outcome": "cpu-error", "detail": unjudgeable}
    from spyre_sim.selections import recording

    with recording() as choices, torch.no_grad():  # the CPU's top-k choices, for a replay
        model(**inputs)
    decode = None
    if generate:
        try:
            decode = _cpu_decode(model, inputs)
        except Exception as error:  # a model that cannot generate on the CPU: forward only
            result["decode"] = [f"not on the CPU: {type(error).__name__}: {error}"[:200]]
    try:
        with spyre_sim.use_stack(stack):
            spyre_adapters.prepare(model, stack)
            result["adapters"] = sorted(
                f"{a.name} {a.version}" for a in spyre_adapters.applied(model)
            )
            model = model.to("spyre")
            telemetry.reset()
            with torch.no_grad():
                feed = {name: value.to("spyre") for name, value in inputs.items()}
                got = model(**feed).logits.cpu().float()
            if decode is not None:
                on_device = {name: value.to("spyre") for name, value in decode.feed.items()}
                prompt = decode.feed["input_ids"].shape[1]
                tokens = _generate(model, on_device).cpu()[:, prompt:]
            snapshot = telemetry.snapshot()
    except Exception as error:  # the device's or an adapter's error is the outcome
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        return {**result, "outcome": "raise", "gap": getattr(error, "gap", None), "detail": detail}
    forward = compare(expected, got, logits=True)
    result["cosine"] = round(forward.cosine, 6)
    result["top1"] = None if forward.top1 is None else round(forward.top1, 4)
    result["miscompiles"] = sorted(snapshot.miscompiles)
    result["emulator_limits"] = sorted(snapshot.emulator_limits)
    # selections inside the model's modules (a router's top-k) decided within one DL16 step
    ties = {
        op: n
        for op, entry in snapshot.rounding_ties.items()
        if (n := sum(rows for path, rows in entry.module_counts.items() if path))
    }
    if ties:
        result["rounding_ties"] = ties
    result["outcome"] = "match" if forward.matches else "mismatch"
    if decode is not None:
        rows = decoding(decode.scores, decode.tokens, tokens)
        result["decode"] = [row.describe() for row in rows]
        if not all(row.matches for row in rows):
            result["outcome"] = "mismatch"
    if result["outcome"] == "mismatch" and ties:
        # a selection rounding decided inside the model: is it the whole difference?
        try:
            replay = _replayed(model, stack, feed, expected, choices, decode)
        except Exception as error:  # the replay's own failure leaves the mismatch standing
            replay = {"matches": False, "error": f"{type(error).__name__}: {error}"[:200]}
        result["replay"] = replay
        if replay["matches"]:
            result["outcome"] = "precision"
    return result


def _types(kind: Kind) -> list[str]:
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, kind.mapping))


def _kind_names(values: list[str] | None) -> list[str]:
    """The ``--kind`` values (repeated or comma lists), in order, each once."""
    names = [name for value in values or ["causal-lm"] for name in value.split(",") if name]
    return list(dict.fromkeys(names))


def _worker(args: argparse.Namespace, kind: Kind, model_type: str) -> dict[str, Any]:
    """The result of probing one type in a process of its own."""
    cmd = [sys.executable, __file__, "--one", model_type, "--kind", kind.name]
    cmd += ["--stack", args.stack, "--memory", str(args.memory)]
    cmd += ["--generate"] if args.generate else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"type": model_type, "kind": kind.name, "outcome": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return {"type": model_type, "kind": kind.name, "outcome": "crash", "detail": tail[0][:300]}


def _summary(results: list[dict[str, Any]], kinds: list[Kind], stack: str) -> list[str]:
    """One line per kind: its types and their count per outcome."""
    lines = []
    for kind in kinds:
        counts = Counter(r["outcome"] for r in results if r["kind"] == kind.name)
        total = sum(counts.values())
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        lines.append(f"{kind.name:22s} {total} types at {stack}: {shown}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument(
        "--kind",
        action="append",
        help=f"kinds of model, repeatable or comma-separated: {', '.join(KINDS)} "
        "(default: causal-lm)",
    )
    parser.add_argument("--types", help="comma-separated model types (default: every one)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per type")
    parser.add_argument("--memory", type=float, default=MEMORY_GIB, help="GiB of data per type")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument(
        "--generate",
        action="store_true",
        help=f"causal LMs: also compare {DECODE_STEPS} greedy tokens of a batch with a "
        "left-padded row (tokens must agree up to a tie)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a worker's own type
    args = parser.parse_args()
    names = _kind_names(args.kind)
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s) {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    kinds = [KINDS[name] for name in names]
    if args.one:
        _cap_memory(args.memory)
        generate = args.generate and kinds[0].name == "causal-lm"
        print(json.dumps(_one(kinds[0], args.one, args.stack, generate)))
        return 0
    named = args.types.split(",") if args.types else None
    mapped = {kind.name: _types(kind) for kind in kinds}
    runs = [(k, t) for k in kinds for t in named or mapped[k.name] if t in mapped[k.name]]
    unmapped = sorted(set(named or ()) - {t for _, t in runs})
    if unmapped:
        print(f"not a type of {', '.join(names)}: {', '.join(unmapped)}", file=sys.stderr)
    results = []
    start = time.perf_counter()
    for kind, model_type in runs:
        result = _worker(args, kind, model_type)
        results.append(result)
        keys = ("cosine", "decode", "gap", "miscompiles", "emulator_limits", "rounding_ties")
        keys += ("replay",)
        shown = {k: result[k] for k in keys if result.get(k) not in (None, [])}
        print(f"{model_type:28s} {kind.name:22s} {result['outcome']:9s} {shown or ''}", flush=True)
    print()
    print("\n".join(_summary(results, kinds, args.stack)))
    print(f"{len(results)} types in {time.perf_counter() - start:.0f} s")
    if args.json:
        sizes = {kind.name: list(kind.attempts) for kind in kinds}
        document = {"stack": args.stack, "sizes": sizes, "results": results}
        args.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
