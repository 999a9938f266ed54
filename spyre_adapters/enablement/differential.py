"""Differential runs: a drawn configuration, adapted and run on the device, against the CPU.

An adapter must not change what a model computes, and what runs on the device must match the
CPU, raise, or be reported as a miscompile. Checking that on the two or three configurations
a test suite happens to build is how a wrong answer got through: one key/value head made
Transformers' ``repeat_kv`` return a stride-0 view that SDPA misread. So this module draws
configurations instead.

A :class:`Case` is one drawn configuration of a family: sizes (a
:class:`~spyre_adapters.enablement.family_configs.SizePreset`: heads, key/value heads, head_dim, FFN and
vocabulary sizes, layers, batch and sequence length, image geometry), config
:class:`~spyre_adapters.enablement.family_configs.Features` (partial rotary, tied embeddings, sliding window),
the attention implementation, padding of the batch, whether one decode step with the KV cache
follows the prefill (causal LMs), and a weight seed. :func:`draw_case` draws
one from :data:`SPACE`. It takes the choice function as an argument, so a seeded
``random.Random`` (a campaign) and Hypothesis (a property test, with shrinking) draw from the
same space.

:func:`build_case` builds the family at those sizes (no download), redraws every weight
matrix from a seeded normal scaled by its fan-in, so that attention patterns and logits depend
on content and position and a wrong computation shows, and records the CPU reference of the
stock model in fp32. :func:`run_case` prepares a copy for a release with the adapters the
lifecycle resolves there (``prepare``, as ``pytest --spyre`` does), runs it on the emulated
device and compares it with the CPU by the triage metric
(:func:`spyre_adapters.agreement.compare`: greedy top-1 at every non-tied position and cosine >=
0.99 for causal LMs, cosine >= 0.99 otherwise). Only positions that hold a token are
compared: padded positions are free to differ. Each run ends in one :class:`Outcome`:

- ``match``: it ran and matched the CPU;
- ``raised``: the device refused it with a lowering or layout error naming its gap;
- ``flagged``: it ran and did not match, and the device's telemetry recorded a documented
  miscompile (the report says so) of a gap no applied adapter bridges;
- ``precision``: it ran and did not match, nothing was recorded, it was within cosine
  :data:`PRECISION_COSINE`, and a control shows the number format explains it: the same
  adapted model in fp16 with no fp32 anywhere fails on the CPU too, or the device run with
  DL16 rounding off (plain fp16 storage) matches (see :func:`run_case`);
- ``missed``: it ran, and telemetry recorded a miscompile of a gap that an applied adapter
  says it bridges: the adapter let it through (whether or not the output still matched);
- ``silent-mismatch``: it ran and did not match, and nothing said so. This is the failure
  this module exists to find;
- ``cpu-mismatch``: the adapted model, run on the CPU in fp32, does not match the stock
  model: the adapters change what the model computes (checked at every release, also where
  the device raises);
- ``error``: something else raised (an adapter failed to apply, a torch error): loud, but a
  bug too.

Only the first four are acceptable.

A drawn configuration the family's config class rejects, whose CPU forward fails (BERT-style
LM heads do not decode with a cache), or whose CPU output cannot judge an fp16 run, is not a
run: :func:`build_case` raises :class:`~spyre_adapters.enablement.family_configs.FamilyBuildError`.

Campaigns: :func:`drawn_cases` gives the same cases of a family in every process and run
(seeded ``random.Random``), :func:`campaign` runs cases at releases, each case in an isolated
worker process (the sweep's), and :func:`adapter_families` / :func:`applied_releases` say
what to draw for an adapter and where it is applied.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import random
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from torch.overrides import TorchFunctionMode

from spyre_adapters.enablement._isolation import WorkerPool
from spyre_adapters.enablement.families import (
    FP16_SMALLEST_NORMAL,
    MIN_COMPARED_VALUES,
    BuiltFamily,
    build_family,
)
from spyre_adapters.enablement.family_configs import (
    REALISTIC,
    FamilyBuildError,
    Features,
    SizePreset,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    from spyre_adapters.agreement import Comparison
    from spyre_adapters.registry import Registry

__all__ = [
    "PRECISION_COSINE",
    "SPACE",
    "Case",
    "CaseResult",
    "CaseRun",
    "Outcome",
    "Space",
    "adapter_families",
    "applied_releases",
    "build_case",
    "campaign",
    "case_worker",
    "draw_case",
    "drawn_cases",
    "run_case",
]

T = TypeVar("T")

Choose = Callable[[Sequence[T]], T]
"""Picks one of the options (the first is the simplest: Hypothesis shrinks towards it)."""


@dataclass(frozen=True)
class Space:
    """The values each axis of a drawn configuration takes, simplest first.

    ``kv`` is ``"one"`` (multi-query), ``"some"`` (grouped: a proper divisor of the head count,
    one if there is none) or ``"all"`` (multi-head); ``head_dims`` are below, at and above a
    stick (64 elements); ``padding`` is ``"none"``, ``"right"`` or ``"left"`` (every row after
    the first is shorter); ``attention`` ``None`` keeps the family's default implementation;
    ``images`` are ``(image_size, patch_size)``.
    """

    heads: tuple[int, ...] = (4, 2, 1, 6)
    kv: tuple[str, ...] = ("one", "some", "all")
    head_dims: tuple[int, ...] = (64, 32, 128, 16, 96)
    intermediates: tuple[int, ...] = (256, 128, 200, 344)
    vocabs: tuple[int, ...] = (256, 1000, 250, 509)
    layers: tuple[int, ...] = (2, 1)
    batches: tuple[int, ...] = (1, 2, 3)
    seq_lens: tuple[int, ...] = (7, 1, 13, 2, 31, 64, 65)
    padding: tuple[str, ...] = ("none", "right", "left")
    attention: tuple[str | None, ...] = (None, "eager")
    decode: tuple[bool, ...] = (False, True)
    partial_rotary: tuple[float | None, ...] = (None, 0.5, 0.25)
    tie_embeddings: tuple[bool | None, ...] = (None, True, False)
    sliding_window: tuple[int | None, ...] = (None, 4, 16)
    images: tuple[tuple[int, int], ...] = ((32, 8), (48, 16), (64, 16))
    seeds: int = 2**16


SPACE = Space()
"""The configuration space differential runs draw from."""


def _kv_heads(heads: int, kv: str) -> int:
    if kv == "all":
        return heads
    if kv == "some":
        return next((d for d in range(2, heads) if heads % d == 0), 1)
    return 1


@dataclass(frozen=True)
class Case:
    """One drawn configuration of a family (see the module docstring)."""

    family: str
    sizes: SizePreset
    features: Features
    attention: str | None
    padding: str
    seed: int
    decode: bool = False

    def describe(self) -> str:
        """A one-line description, enough to rebuild the case by hand."""
        s, f = self.sizes, self.features
        parts = [
            f"{self.family}: heads {s.heads} kv {s.kv_heads} head_dim {s.head_dim}",
            f"hidden {s.hidden} ffn {s.intermediate} vocab {s.vocab} layers {s.layers}",
            f"batch {s.batch} x seq {s.seq_len} padding {self.padding}"
            + (" + 1 decode step" if self.decode else ""),
        ]
        extras = [
            f"attention {self.attention}" if self.attention else "",
            f"partial_rotary {f.partial_rotary}" if f.partial_rotary is not None else "",
            f"tie_embeddings {f.tie_embeddings}" if f.tie_embeddings is not None else "",
            f"sliding_window {f.sliding_window}" if f.sliding_window is not None else "",
            f"image {s.image_size}/{s.patch_size}",
            f"seed {self.seed}",
        ]
        return ", ".join(parts + [e for e in extras if e])

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "sizes": dataclasses.asdict(self.sizes),
            "features": dataclasses.asdict(self.features),
            "attention": self.attention,
            "padding": self.padding,
            "seed": self.seed,
            "decode": self.decode,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Case:
        return cls(
            family=data["family"],
            sizes=SizePreset(**data["sizes"]),
            features=Features(**data["features"]),
            attention=data["attention"],
            padding=data["padding"],
            seed=int(data["seed"]),
            decode=bool(data.get("decode", False)),
        )


def draw_case(family: str, choose: Choose[Any], space: Space = SPACE) -> Case:
    """Draw a configuration of ``family`` from ``space``, one axis at a time with ``choose``."""
    heads = choose(space.heads)
    head_dim = choose(space.head_dims)
    image_size, patch_size = choose(space.images)
    sizes = dataclasses.replace(
        REALISTIC,
        name="drawn",
        heads=heads,
        kv_heads=_kv_heads(heads, choose(space.kv)),
        head_dim=head_dim,
        hidden=heads * head_dim,
        intermediate=choose(space.intermediates),
        vocab=choose(space.vocabs),
        layers=choose(space.layers),
        batch=choose(space.batches),
        seq_len=choose(space.seq_lens),
        image_size=image_size,
        patch_size=patch_size,
    )
    features = Features(
        partial_rotary=choose(space.partial_rotary),
        tie_embeddings=choose(space.tie_embeddings),
        sliding_window=choose(space.sliding_window),
    )
    return Case(
        family=family,
        sizes=sizes,
        features=features,
        attention=choose(space.attention),
        padding=choose(space.padding),
        decode=choose(space.decode),
        seed=choose(range(space.seeds)),
    )


def drawn_cases(family: str, count: int, seed: int = 0, space: Space = SPACE) -> list[Case]:
    """``count`` configurations of ``family`` drawn from ``space`` by a ``random.Random``
    seeded with ``seed`` and the family name: the same list in every process and run."""
    rng = random.Random(f"{seed}:{family}")
    return [draw_case(family, rng.choice, space) for _ in range(count)]


# -- building ----------------------------------------------------------------------------------


@dataclass
class _Compared(BuiltFamily):
    """A built family whose runs return only the positions that hold a token, and, with
    ``next_ids``, the logits of one decode step after the prefill (KV cache on the device)."""

    valid: torch.Tensor | None = None
    next_ids: torch.Tensor | None = None
    cache_name: str = "cache"

    def run(self, model: nn.Module, device: str | torch.device = "cpu") -> torch.Tensor:
        if self.next_ids is None:
            return _positions(super().run(model, device).cpu(), self.valid)
        import torch

        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        feed = {
            name: (v.to(dtype) if v.is_floating_point() and dtype else v).to(device)
            for name, v in self.inputs.items()
        }
        step: dict[str, Any] = {"input_ids": self.next_ids.to(device), "use_cache": True}
        mask = self.inputs.get("attention_mask")
        if mask is not None:  # built on the host: harness work, not the model's
            step["attention_mask"] = torch.cat([mask, torch.ones_like(mask[:, :1])], -1).to(device)
        with torch.no_grad():
            prefill = model(**feed, use_cache=True)
            step[self.cache_name] = getattr(prefill, self.cache_name)
            decoded = model(**step)
        first = _positions(prefill.logits.cpu(), self.valid)
        vocab = first.shape[-1]
        return torch.cat([first.reshape(-1, vocab), decoded.logits.cpu().reshape(-1, vocab)])


def _positions(output: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    if valid is None or output.dim() < 2 or tuple(output.shape[:2]) != tuple(valid.shape):
        return output
    return output[valid]


def _rescale_weights(model: nn.Module, seed: int) -> None:
    """Redraw every weight of two or more dims from N(0, 1/fan_in); vectors (norm weights,
    biases) keep their initial values (a norm that adds one to its weight starts at zero)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _name, param in model.named_parameters():
            if param.dim() < 2 or not param.is_floating_point():
                continue
            fan_in = param.shape[-1] if param.dim() == 2 else math.prod(param.shape[1:])
            fresh = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            param.copy_(fresh / math.sqrt(max(fan_in, 1)))


def _padded(
    inputs: dict[str, torch.Tensor], padding: str, pad_id: int, accepts_mask: bool
) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """The inputs with every row after the first padded (``padding`` ``"left"``/``"right"``),
    and the positions that hold a token; ``None`` when nothing is padded."""
    import torch

    ids = inputs.get("input_ids")
    if padding == "none" or ids is None or not accepts_mask:
        return inputs, None
    batch, seq = ids.shape
    valid = torch.ones(batch, seq, dtype=torch.bool)
    for row in range(1, batch):
        length = max(1, seq * (batch - row) // batch)
        if padding == "right":
            valid[row, length:] = False
        else:
            valid[row, : seq - length] = False
    feed = dict(inputs)
    for name in ("input_ids", "decoder_input_ids"):
        if name in feed and feed[name].shape == valid.shape:
            feed[name] = feed[name].masked_fill(~valid, pad_id)
    feed["attention_mask"] = valid.long()
    return feed, valid


def _pad_id(config: Any, vocab: int) -> int:
    for owner in (config, getattr(config, "text_config", None)):
        value = getattr(owner, "pad_token_id", None) if owner is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab:
            return value
    return 0


def _unjudgeable(reference: torch.Tensor) -> str | None:
    import torch

    if reference.numel() < MIN_COMPARED_VALUES:
        return f"{reference.numel()} compared value(s)"
    if not bool(torch.isfinite(reference).all()):
        return "the CPU reference is not finite"
    if float(reference.abs().max()) < FP16_SMALLEST_NORMAL:
        return "every value of the CPU reference vanishes in fp16"
    return None


def build_case(case: Case) -> BuiltFamily:
    """Build ``case`` (see the module docstring); the CPU reference is the stock model's, in
    fp32, at the positions that hold a token.

    Raises :class:`~spyre_adapters.enablement.family_configs.FamilyBuildError` when the family does not build
    at the drawn sizes (stage ``"config"`` also when only the family's own widths would), or
    its CPU output cannot judge a run (stage ``"reference"``).
    """
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Transformers' notices about the drawn config
        built = build_family(case.family, preset=case.sizes, seed=case.seed, features=case.features)
        if built.fit != "preset":
            raise FamilyBuildError(
                case.family, "config", "the drawn sizes do not build (only the family's own do)"
            )
        model = built.model
        if case.attention is not None:
            try:
                model.set_attn_implementation(case.attention)  # type: ignore[operator]
            except Exception as exc:
                raise FamilyBuildError(case.family, "config", str(exc)[:300]) from exc
        _rescale_weights(model, case.seed)
        params = inspect.signature(model.forward).parameters
        inputs, valid = _padded(
            built.inputs,
            case.padding,
            _pad_id(built.config, case.sizes.vocab),
            "attention_mask" in params,
        )
        next_ids = None
        # Transformers 5.2x names the KV cache ``cache``, earlier 5.x ``past_key_values``
        cache_name = "cache" if "cache" in params else "past_key_values"
        decodes = built.kind == "causal-lm" and cache_name in params
        if case.decode and decodes and "input_ids" in inputs:
            generator = torch.Generator().manual_seed(case.seed)
            batch = inputs["input_ids"].shape[0]
            next_ids = torch.randint(0, case.sizes.vocab, (batch, 1), generator=generator)
        compared = _Compared(
            model_type=built.model_type,
            preset=built.preset,
            config=built.config,
            model=model,
            inputs=inputs,
            kind=built.kind,
            output_name=built.output_name,
            reference=built.reference,
            options=built.options,
            fit=built.fit,
            valid=valid,
            next_ids=next_ids,
            cache_name=cache_name,
        )
        try:
            reference = compared.run(model, "cpu").detach().float()
        except Exception as exc:
            raise FamilyBuildError(case.family, "forward", str(exc)[:300]) from exc
    why = _unjudgeable(reference)
    if why is not None:
        raise FamilyBuildError(case.family, "reference", why)
    compared.reference = reference
    return compared


# -- running -----------------------------------------------------------------------------------


class Outcome(str, enum.Enum):
    """How one run of a case at a release ended (see the module docstring)."""

    MATCH = "match"
    RAISED = "raised"
    FLAGGED = "flagged"
    PRECISION = "precision"
    MISSED = "missed"
    SILENT_MISMATCH = "silent-mismatch"
    CPU_MISMATCH = "cpu-mismatch"
    ERROR = "error"

    @property
    def acceptable(self) -> bool:
        """Matched, refused loudly, reported as a miscompile no adapter claims to bridge, or
        off by the device's number format only."""
        return self in (Outcome.MATCH, Outcome.RAISED, Outcome.FLAGGED, Outcome.PRECISION)


@dataclass(frozen=True)
class CaseRun:
    """One case run at one release with the resolved adapters.

    ``adapters`` were applied (``name version``); ``gap`` is the gap a ``raised`` run names;
    ``miscompiles`` the gaps whose miscompiles telemetry recorded; ``cosine``/``top1`` the
    comparison with the CPU when it ran (``top1`` for causal LMs).
    """

    case: Case
    release: str
    outcome: Outcome
    detail: str
    adapters: tuple[str, ...] = ()
    gap: str | None = None
    miscompiles: tuple[str, ...] = ()
    cosine: float | None = None
    top1: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case.to_json(),
            "release": self.release,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "adapters": list(self.adapters),
            "gap": self.gap,
            "miscompiles": list(self.miscompiles),
            "cosine": self.cosine if self.cosine is None or math.isfinite(self.cosine) else None,
            "top1": self.top1,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseRun:
        return cls(
            case=Case.from_json(data["case"]),
            release=data["release"],
            outcome=Outcome(data["outcome"]),
            detail=data["detail"],
            adapters=tuple(data.get("adapters", ())),
            gap=data.get("gap"),
            miscompiles=tuple(data.get("miscompiles", ())),
            cosine=data.get("cosine"),
            top1=data.get("top1"),
        )


PRECISION_COSINE = 0.999
"""A mismatch this close to the CPU (cosine) is judged against the precision controls (see
:func:`run_case`) before it can be called silent."""


class _Fp16Storage(TorchFunctionMode):
    """Every fp32 result is stored as fp16, as the device stores it (gap ``fp32-storage``):
    run on the CPU, a half-precision model then has no fp32 anywhere."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        import torch
        from torch.utils._pytree import tree_map

        out = func(*args, **(kwargs or {}))

        def store(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dtype is torch.float32:
                return value.half()
            return value

        return tree_map(store, out)


def _cpu_check(
    built: BuiltFamily, release: str, registry: Registry, *, fp16_storage: bool = False
) -> tuple[Comparison | None, str]:
    """The adapted model on the CPU against the stock model's reference: in fp32, or with
    ``fp16_storage`` in fp16 with no fp32 anywhere (:class:`_Fp16Storage`). ``None`` and the
    error when the run raised."""
    import copy
    from contextlib import nullcontext

    import torch

    from spyre_adapters.agreement import compare
    from spyre_adapters.preparation import prepare, restore

    model = copy.deepcopy(built.model)
    if fp16_storage:
        model = model.half()
    try:
        prepare(model, stack=release, registry=registry)
        with torch.no_grad(), _Fp16Storage() if fp16_storage else nullcontext():
            output = built.run(model, "cpu")
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        restore(model)
    return compare(built.reference, output, logits=built.kind == "causal-lm"), ""


def _facts(comparison: Comparison) -> str:
    return f"cosine {comparison.cosine:.4f}" + (
        f", top-1 {comparison.top1:.2f} over {comparison.scored} positions"
        if comparison.top1 is not None
        else ""
    )


def _precision_explained(built: BuiltFamily, release: str, registry: Registry) -> str:
    """Why a close device mismatch is a precision limit (see :func:`run_case`), or ``""``."""
    import spyre_sim
    from spyre_adapters.enablement.device_runs import run_on_device

    half, _ = _cpu_check(built, release, registry, fp16_storage=True)
    if half is not None and not half.matches:
        return f"fp16 with no fp32 anywhere fails on the CPU too ({_facts(half)})"
    with spyre_sim.configure(numerics=False):
        plain = run_on_device(built, release, adapters=True, registry=registry, list_all_gaps=False)
    if plain.ok:
        return "matches with DL16 rounding off (plain fp16 storage)"
    return ""


def run_case(
    case: Case, built: BuiltFamily, release: str, *, registry: Registry | None = None
) -> CaseRun:
    """Run ``built`` (from :func:`build_case`) at ``release`` with the adapters the lifecycle
    resolves there, compare it with the CPU and say how it ended (see the module docstring).

    The adapted model is also run on the CPU in fp32: an adapter must not change what the
    model computes, whatever the device does (``cpu-mismatch``; this also checks adapters
    that are only applied at releases where nothing runs on the device). A device mismatch
    that nothing reports, within :data:`PRECISION_COSINE` of the CPU, is ``precision`` when
    one of two controls explains it: the adapted model run on the CPU in fp16 with no fp32
    anywhere fails the same comparison (the device stores fp32 as fp16: a model that computes
    its attention scores in fp32, as GPT-Neo does, loses that on any fp16-only machine); or
    the device run with DL16 rounding off (plain fp16 storage) matches.
    """
    from spyre_adapters.enablement.device_runs import run_on_device
    from spyre_adapters.preparation import default_registry

    registry = default_registry() if registry is None else registry
    run = run_on_device(built, release, adapters=True, registry=registry, list_all_gaps=False)
    adapters = tuple(run.adapters)
    miscompiles = tuple(run.miscompiles)
    error = run.error
    if error is not None and error.kind == "prepare":
        first = error.message.splitlines()[0] if error.message else error.type
        return CaseRun(case, release, Outcome.ERROR, f"prepare: {first}", adapters)
    on_cpu, failure = _cpu_check(built, release, registry)
    if on_cpu is None:
        return CaseRun(case, release, Outcome.ERROR, f"the adapted model on the CPU: {failure}")
    if not on_cpu.matches:
        return CaseRun(
            case,
            release,
            Outcome.CPU_MISMATCH,
            "the adapted model on the CPU (fp32) does not match the stock model: " + _facts(on_cpu),
            adapters,
        )
    if error is not None:
        first = error.message.splitlines()[0] if error.message else error.type
        if error.kind == "lowering":
            return CaseRun(case, release, Outcome.RAISED, first, adapters, error.gap, miscompiles)
        return CaseRun(case, release, Outcome.ERROR, f"run: {first}", adapters)
    bridged = {
        gap: label
        for label in adapters
        for gap in registry.get(*label.split(" ", 1)).gaps
        if gap in miscompiles and run.covers(label, gap)
    }
    if bridged:
        missed = ", ".join(f"{gap} (bridged by {label})" for gap, label in sorted(bridged.items()))
        return CaseRun(
            case, release, Outcome.MISSED, f"miscompiled: {missed}", adapters, None, miscompiles
        )
    comparison = run.comparison
    assert comparison is not None
    facts = _facts(comparison)
    if comparison.matches:
        outcome = Outcome.MATCH
    elif miscompiles:
        outcome = Outcome.FLAGGED
        facts += f"; miscompiles: {', '.join(miscompiles)}"
    else:
        outcome = Outcome.SILENT_MISMATCH
        if comparison.cosine >= PRECISION_COSINE:
            explained = _precision_explained(built, release, registry)
            if explained:
                outcome = Outcome.PRECISION
                facts += f"; {explained}"
    return CaseRun(
        case,
        release,
        outcome,
        facts,
        adapters,
        None,
        miscompiles,
        comparison.cosine,
        comparison.top1,
    )


# -- what to draw ------------------------------------------------------------------------------


def adapter_families(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Per adapter name, the families its installed manifests list (every version), sorted."""
    found: dict[str, set[str]] = {}
    for manifest in registry.manifests():
        found.setdefault(manifest.name, set()).update(manifest.families)
    return {name: tuple(sorted(families)) for name, families in sorted(found.items())}


def applied_releases(registry: Registry, name: str, releases: Iterable[str]) -> tuple[str, ...]:
    """The releases among ``releases`` at which ``prepare`` applies adapter ``name``."""
    from spyre_adapters.lifecycle import Lifecycle

    lifecycle = Lifecycle(registry)
    return tuple(
        release
        for release in releases
        if any(row.name == name and row.applied for row in lifecycle.status_at(release))
    )


# -- campaigns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """A case run at every release of a campaign; ``built`` is false (with the ``reason``) when
    the drawn configuration is not a run (see :func:`build_case`)."""

    case: Case
    built: bool
    reason: str = ""
    runs: tuple[CaseRun, ...] = ()
    seconds: float = 0.0


def case_worker(case: Mapping[str, Any], releases: Sequence[str]) -> dict[str, Any]:
    """The work of one isolated campaign worker: build the case (JSON, see
    :meth:`Case.to_json`) once and run it at each release; JSON results."""
    import torch
    import transformers

    torch.set_num_threads(1)  # workers run side by side: one core each
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    drawn = Case.from_json(case)
    try:
        built = build_case(drawn)
    except FamilyBuildError as exc:
        return {"built": False, "reason": str(exc)}
    return {"built": True, "runs": [run_case(drawn, built, r).to_json() for r in releases]}


def _isolated(
    case: Case, releases: Sequence[str], timeout: float, workers: WorkerPool
) -> CaseResult:
    outcome = workers.run(
        case_worker, (case.to_json(), list(releases)), timeout * max(len(releases), 1)
    )
    if outcome.status == "ok":
        value = outcome.value
        if not value["built"]:
            return CaseResult(case, False, value["reason"], seconds=outcome.seconds)
        runs = tuple(CaseRun.from_json(r) for r in value["runs"])
        return CaseResult(case, True, runs=runs, seconds=outcome.seconds)
    lines = outcome.error.strip().splitlines()
    detail = f"worker {outcome.status}: {lines[-1] if lines else outcome.status}"
    runs = tuple(CaseRun(case, r, Outcome.ERROR, detail) for r in releases)
    return CaseResult(case, True, runs=runs, seconds=outcome.seconds)


def campaign(
    cases: Sequence[Case],
    releases: Sequence[str],
    *,
    jobs: int = 1,
    timeout: float = 120.0,
) -> Iterator[CaseResult]:
    """Run every case at every release, each case in an isolated worker process (a crash or
    a hang, after ``timeout`` seconds per release, becomes ``error`` runs), ``jobs`` workers at
    a time; results arrive as cases finish."""
    with WorkerPool(jobs) as workers, ThreadPoolExecutor(max_workers=max(1, jobs)) as waiting:
        futures = [
            waiting.submit(_isolated, case, list(releases), timeout, workers) for case in cases
        ]
        for future in futures:
            yield future.result()
