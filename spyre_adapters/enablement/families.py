"""Model families: a small, runnable instance of a Transformers ``model_type``, built from its config.

No checkpoint is downloaded: the family's config is shrunk to a size preset
(:mod:`spyre_adapters.enablement.family_configs`: :data:`~spyre_adapters.enablement.size_presets.REALISTIC`
by default, the testers' :data:`~spyre_adapters.enablement.size_presets.TINY`, and the size
variants), and the model is built from it with seeded random weights.

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
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from spyre_adapters.agreement import compare, padding_positions
from spyre_adapters.enablement.family_configs import family_config, is_config, is_int
from spyre_adapters.enablement.size_presets import (
    NO_FEATURES,
    REALISTIC,
    FamilyBuildError,
    Features,
    SizePreset,
)
from spyre_adapters.main_output import LOGITS_FIRST, main_output_name, output_named

if TYPE_CHECKING:
    from spyre_adapters.agreement import Comparison
    from spyre_sim.selections import Choice

__all__ = [
    "BuiltFamily",
    "FP16_SMALLEST_NORMAL",
    "MIN_COMPARED_VALUES",
    "build_family",
    "buildable_families",
    "candidate_families",
    "compared_output_name",
    "judge_reference",
]


MIN_COMPARED_VALUES = 8
"""Fewest values a compared output may have: a cosine over fewer says little."""
FP16_SMALLEST_NORMAL = 2.0**-14
"""A reference whose every magnitude is below this vanishes in fp16: nothing to compare."""


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

    def positions(self) -> torch.Tensor | None:
        """The positions of the compared output that are not padding (``None``: all of them):
        :func:`spyre_adapters.agreement.padding_positions` of this family's inputs."""
        return padding_positions(self.inputs, self.reference, self.output_name)

    def compared(self, output: torch.Tensor) -> Comparison:
        """``output`` (a run of this family) against the CPU reference, at the positions that
        hold a token: by greedy top-1 and cosine for causal LMs, by cosine otherwise
        (:func:`spyre_adapters.agreement.compare`)."""
        return compare(
            self.reference, output, logits=self.kind == "causal-lm", positions=self.positions()
        )

    def irreproducible(self) -> str | None:
        """Why the CPU reference is not what another CPU forward of the stock model gives
        (``None``: it is). A forward that draws random numbers (VITS samples its durations and
        its waveform from noise) has no reference a device run could match: a mismatch of such
        a family says nothing about the device."""
        again = self.run(unrun(self.model)).detach().float()
        if tuple(again.shape) != tuple(self.reference.shape):
            shapes = f"{list(self.reference.shape)}, then {list(again.shape)}"
            return f"two CPU forwards of the stock model give outputs of shapes {shapes}"
        if not torch.allclose(again, self.reference, rtol=1e-4, atol=1e-5, equal_nan=True):
            worst = float((again - self.reference).abs().nan_to_num(nan=0.0).max())
            return f"two CPU forwards of the stock model differ (max abs {worst:.3g})"
        return None

    def cpu_choices(self) -> list[Choice]:
        """The top-k choices a CPU forward of the stock model makes, in call order
        (:func:`spyre_sim.selections.recording`), to replay on the device."""
        from spyre_sim.selections import recording

        with recording() as choices:
            self.run(unrun(self.model))
        return choices

    def not_judged(self, mismatch: str) -> str | None:
        """What to report for a device run that did not match the CPU reference (described by
        ``mismatch``) when that reference does not reproduce (:meth:`irreproducible`); ``None``
        when it does, and the mismatch stands. Triage and the bridge loop both say it so."""
        why = self.irreproducible()
        if why is None:
            return None
        return f"not judged: {why} (its forward draws random numbers); {mismatch}"


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


def _special_ids(config: Any) -> set[int]:
    ids: set[int] = set()
    for owner in [config, *(v for v in vars(config).values() if is_config(v))]:
        for key, value in vars(owner).items():
            if key.endswith(("_token_id", "_token_index")) and is_int(value):
                ids.add(value)
    return ids


def _vocab(config: Any) -> int:
    for owner in [config, getattr(config, "text_config", None), getattr(config, "decoder", None)]:
        if owner is not None and is_int(getattr(owner, "vocab_size", None)):
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
        height = width = int(size) if is_int(size) else preset.image_size
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

    def raw_audio_channels(gen: torch.Generator) -> dict[str, torch.Tensor]:
        # codecs (EnCodec, DAC, Mimi) take [batch, channels, samples]
        channels = int(getattr(config, "audio_channels", 1) or 1)
        return {"input_values": torch.randn(preset.batch, channels, 4000, generator=gen)}

    def series(gen: torch.Generator) -> dict[str, torch.Tensor]:
        # forecasters: a context of past values (and their lags) and the horizon to predict
        horizon = int(config.prediction_length)
        past = int(config.context_length) + max(config.lags_sequence)
        count = int(config.num_time_features)
        batch = preset.batch
        return {
            "past_values": torch.randn(batch, past, generator=gen),
            "past_time_features": torch.randn(batch, past, count, generator=gen),
            "past_observed_mask": torch.ones(batch, past),
            "future_values": torch.randn(batch, horizon, generator=gen),
            "future_time_features": torch.randn(batch, horizon, count, generator=gen),
        }

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
        plans.append(("raw-audio-channels", raw_audio_channels))
    if main == "past_values" and {"past_time_features", "future_values"} <= set(params):
        plans.append(("series", series))
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


def unrun(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` to take the CPU reference with, so that the model handed on has
    never run: a forward may cache tensors in plain attributes (Mimi's and EnCodec's codebooks
    keep ``_embed``), which ``.to(device)`` does not move, as a user's model that goes to the
    device before its first forward would not have them."""
    return copy.deepcopy(model)


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
    widths are at most :data:`~.family_configs.MAX_DEPTH_FIT_WIDTH`. Raises :class:`~.size_presets.FamilyBuildError` naming
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
        raise FamilyBuildError.failed(model_type, "instantiate", exc) from exc
    torch.manual_seed(seed)
    try:
        model = model_class(config).eval()
    except Exception as exc:
        raise FamilyBuildError.failed(model_type, "instantiate", exc) from exc
    try:
        plans = _input_plans(model, config, preset)
    except Exception as exc:
        raise FamilyBuildError.failed(model_type, "inputs", exc) from exc
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
                out = unrun(model)(**inputs, **options)
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
    raise FamilyBuildError.failed(model_type, "forward", first_error)
