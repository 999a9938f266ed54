"""Triage: what does it take to run a Transformers family on a stack release?

For a family (a ``model_type``) and a release R, :func:`triage_family` builds a small instance
from its config (:mod:`spyre_adapters.enablement.families`), records the CPU reference, and runs a forward
on the emulated ``spyre`` device at R twice:

1. **stock**: the model as Transformers ships it (fp16 on the device);
2. **adapted**: after ``spyre_adapters.prepare(model, stack=R)`` (the adapters the lifecycle
   resolves for R, applied on the host before the move, as ``pytest --spyre`` does) — only when
   the stock run does not already run and match.

Each run records the gaps the device met (with the module path of each), the ops that fell back
to the host, the miscompiles, and, when it ran, the comparison with the CPU reference.
A run stops at the first gap that raises; to list *every* gap on the path, a failing run is
repeated at a derived release where each raised gap is stepped past (its op runs as a host
fallback, or its layout rule is off), until the forward completes (at most
:data:`MAX_GAPS_LISTED` steps). Gaps found that way are marked ``raised``: each would stop the
real stack.

**Comparison** (how real teams judge "it works", see the domain notes): a causal LM must give the
CPU's greedy top-1 token at every position of the prompt (positions where the CPU's two best
logits are closer than :data:`TIE_MARGIN` of the logit range are ties that any rounding may flip,
and are not scored), and every output must have a cosine similarity >= :data:`MIN_COSINE` with
the CPU output.

The verdict is a :class:`Category` computed by :func:`classify`, the one function the CLI, the
sweep and the pytest-xdist sweep items share.

**Variants.** A family that is enabled at R (``native`` or ``adapted``) is also run at the size
variants of :data:`spyre_adapters.enablement.families.VARIANTS` that build it differently (one key/value
head; a batch of 3 x 13 tokens with a vocabulary of 1000), stock if it is native, adapted if
it is adapted: a configuration the main preset does not exercise can still give a wrong
answer (one KV head did). Each is a :class:`VariantCheck` in ``TriageResult.variants``, and a
failing one is named in the detail. The category stays the verdict on the main preset, so
the sweep's figures keep their meaning; ``TriageResult.variants_ok`` says whether every
variant passed.
"""

from __future__ import annotations

import copy
import enum
import math
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from spyre_adapters.enablement.families import (
    REALISTIC,
    VARIANTS,
    BuiltFamily,
    FamilyBuildError,
    SizePreset,
    variants_for,
)
from spyre_adapters.enablement.skeletons import manifest_skeleton

if TYPE_CHECKING:
    import torch
    from torch import nn

    from spyre_adapters.contract import Adapter, ModelEdit
    from spyre_adapters.registry import Registry
    from spyre_sim.catalogue import Release
    from spyre_sim.telemetry import Snapshot

__all__ = [
    "MIN_COSINE",
    "TIE_MARGIN",
    "Category",
    "Comparison",
    "DeviceRun",
    "GapHit",
    "RunError",
    "TriageResult",
    "VariantCheck",
    "build_variants",
    "classify",
    "compare",
    "manifest_skeleton",
    "run_on_device",
    "step_past",
    "suggest_manifest",
    "triage",
    "triage_family",
]

#: Minimum cosine similarity of device output vs CPU output (the device bar of real teams).
MIN_COSINE = 0.99
#: Causal LMs: CPU top-2 margins below this fraction of the position's logit range are ties.
TIE_MARGIN = 0.01


class Category(str, enum.Enum):
    """The verdict for one (family, release). Values are stable: never renamed, only added.

    - ``native``: the stock model runs on the device and matches the CPU; no adapter needed.
    - ``adapted``: the stock model fails or mismatches; with the resolved adapters it runs and
      matches.
    - ``blocked``: the adapted model still fails on a gap that no registered adapter bridges.
    - ``not-implemented-adapter``: the adapted model fails on a gap that a registered adapter
      bridges, but that adapter was not applied (it does not match this family's modules, or is
      not applied at this release).
    - ``mismatch``: the model runs (with the adapters) but does not match the CPU.
    - ``adapter-failed``: ``prepare`` raised (an adapter failed to apply).
    - ``device-error``: the device run raised something that is not a lowering error.
    - ``build-failed``: the family does not instantiate from its config (or no inputs for it).
    - ``reference-failed``: the family instantiates but its CPU forward fails, or gives an
      output no fp16 run can be judged against (too few values, or all of them vanishing).
    - ``worker-crashed``: the isolated worker process died (signal, abort, out of memory).
    - ``worker-timeout``: the isolated worker process exceeded its time limit and was killed.
    - ``internal-error``: the triage code itself raised in the worker (a bug to report).
    """

    NATIVE = "native"
    ADAPTED = "adapted"
    BLOCKED = "blocked"
    NOT_IMPLEMENTED_ADAPTER = "not-implemented-adapter"
    MISMATCH = "mismatch"
    ADAPTER_FAILED = "adapter-failed"
    DEVICE_ERROR = "device-error"
    BUILD_FAILED = "build-failed"
    REFERENCE_FAILED = "reference-failed"
    WORKER_CRASHED = "worker-crashed"
    WORKER_TIMEOUT = "worker-timeout"
    INTERNAL_ERROR = "internal-error"

    @property
    def enabled(self) -> bool:
        """The family runs and matches at this release (with or without adapters)."""
        return self in (Category.NATIVE, Category.ADAPTED)

    @property
    def built(self) -> bool:
        """The family built and ran on the CPU (it counts in coverage denominators)."""
        return self not in (
            Category.BUILD_FAILED,
            Category.REFERENCE_FAILED,
            Category.WORKER_CRASHED,
            Category.WORKER_TIMEOUT,
            Category.INTERNAL_ERROR,
        )


@dataclass(frozen=True)
class GapHit:
    """A gap the device met: the op, where in the model, how often, and whether it raised."""

    gap: str
    op: str | None
    module_path: str | None
    count: int = 1
    raised: bool = False


@dataclass(frozen=True)
class RunError:
    """Why a run did not complete. ``kind``: ``lowering`` (a ``SpyreLoweringError``, with
    ``gap``/``op``/``module_path``), ``prepare`` (an adapter failed to apply) or ``other``."""

    kind: str
    type: str
    message: str
    gap: str | None = None
    op: str | None = None
    module_path: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Device output vs CPU reference. ``top1`` is the agreement over ``scored`` positions
    (causal LMs only); ``matches`` applies the criterion named by ``criterion``."""

    matches: bool
    cosine: float
    max_abs_error: float
    top1: float | None = None
    scored: int = 0
    criterion: str = ""


@dataclass
class DeviceRun:
    """One forward on the device: stock (``adapters`` empty) or adapted."""

    ran: bool
    error: RunError | None = None
    gaps: list[GapHit] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)
    miscompiles: list[str] = field(default_factory=list)
    comparison: Comparison | None = None
    adapters: list[str] = field(default_factory=list)
    not_applied: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    all_gaps_listed: bool = False
    bridged: dict[str, int] = field(default_factory=dict)
    idle: list[str] = field(default_factory=list)

    @property
    def working(self) -> list[str]:
        """The adapters applied, without the op bridges that computed no call in this run
        (a bridge matches every model, and changes only a model that reaches its ops)."""
        return [a for a in self.adapters if a not in self.idle]

    @property
    def ok(self) -> bool:
        """It ran and matched the CPU."""
        return self.ran and self.comparison is not None and self.comparison.matches


@dataclass(frozen=True)
class VariantCheck:
    """The family at a size variant (``preset``), run as its main check passed: ``ok`` when
    it ran and matched the CPU; ``detail`` says how it went; ``miscompiles`` were recorded."""

    preset: str
    ok: bool
    detail: str
    miscompiles: tuple[str, ...] = ()


@dataclass
class TriageResult:
    """The triage of one family at one release (JSON: :meth:`to_json`)."""

    family: str
    release: str
    preset: str
    category: Category
    detail: str
    kind: str | None = None
    stock: DeviceRun | None = None
    adapted: DeviceRun | None = None
    bridging: dict[str, list[str]] = field(default_factory=dict)
    blockers: list[GapHit] = field(default_factory=list)
    suggestions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    fit: str | None = None
    variants: list[VariantCheck] = field(default_factory=list)

    @property
    def variants_ok(self) -> bool:
        """Every size variant checked passed (true when none was checked)."""
        return all(v.ok for v in self.variants)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-serialisable data (keys documented in :mod:`spyre_adapters.enablement.sweep`)."""
        data = asdict(self)
        data["category"] = self.category.value
        data["enabled"] = self.category.enabled
        data["variants_ok"] = self.variants_ok
        clean: dict[str, Any] = _finite(data)
        return clean

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TriageResult:
        """The inverse of :meth:`to_json`."""

        def run(raw: Mapping[str, Any] | None) -> DeviceRun | None:
            if raw is None:
                return None
            return DeviceRun(
                ran=raw["ran"],
                error=RunError(**raw["error"]) if raw.get("error") else None,
                gaps=[GapHit(**g) for g in raw.get("gaps", [])],
                fallbacks=dict(raw.get("fallbacks", {})),
                miscompiles=list(raw.get("miscompiles", [])),
                comparison=Comparison(**raw["comparison"]) if raw.get("comparison") else None,
                adapters=list(raw.get("adapters", [])),
                not_applied=dict(raw.get("not_applied", {})),
                seconds=raw.get("seconds", 0.0),
                all_gaps_listed=raw.get("all_gaps_listed", False),
                bridged=dict(raw.get("bridged", {})),
                idle=list(raw.get("idle", [])),
            )

        return cls(
            family=data["family"],
            release=data["release"],
            preset=data["preset"],
            category=Category(data["category"]),
            detail=data["detail"],
            kind=data.get("kind"),
            stock=run(data.get("stock")),
            adapted=run(data.get("adapted")),
            bridging={k: list(v) for k, v in data.get("bridging", {}).items()},
            blockers=[GapHit(**g) for g in data.get("blockers", [])],
            suggestions=dict(data.get("suggestions", {})),
            seconds=data.get("seconds", 0.0),
            fit=data.get("fit"),
            variants=[
                VariantCheck(v["preset"], v["ok"], v["detail"], tuple(v.get("miscompiles", ())))
                for v in data.get("variants", [])
            ],
        )


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: replace them with ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# -- comparison --------------------------------------------------------------------------------


def compare(kind: str, reference: torch.Tensor, output: torch.Tensor) -> Comparison:
    """Compare a device output (already on the CPU) with the CPU reference (see module doc)."""
    import torch

    ref = reference.detach().float().cpu()
    out = output.detach().float().cpu()
    if ref.shape != out.shape:
        return Comparison(False, float("nan"), float("inf"), criterion="shape differs")
    finite = bool(torch.isfinite(out).all())
    a, b = ref.flatten(), out.flatten()
    denom = float(a.norm() * b.norm())
    cosine = float(torch.dot(a, b)) / denom if denom > 0 and finite else float("nan")
    if denom == 0 and finite and bool(torch.equal(a, b)):
        cosine = 1.0
    max_abs = float((ref - out).abs().max()) if finite and ref.numel() else float("inf")
    cosine_ok = finite and cosine >= MIN_COSINE
    if kind != "causal-lm" or ref.dim() < 2 or ref.shape[-1] < 2:
        return Comparison(cosine_ok, cosine, max_abs, criterion=f"cosine >= {MIN_COSINE}")
    ref2 = ref.reshape(-1, ref.shape[-1])
    out2 = out.reshape(-1, out.shape[-1])
    top2 = ref2.topk(2, dim=-1).values
    spread = (ref2.max(dim=-1).values - ref2.min(dim=-1).values).clamp_min(1e-12)
    scored = (top2[:, 0] - top2[:, 1]) > TIE_MARGIN * spread
    agree = ref2.argmax(dim=-1) == out2.argmax(dim=-1)
    n_scored = int(scored.sum())
    top1 = float(agree[scored].float().mean()) if n_scored else float(agree.float().mean())
    top1_ok = bool(agree[scored].all()) if n_scored else True
    return Comparison(
        matches=cosine_ok and top1_ok,
        cosine=cosine,
        max_abs_error=max_abs,
        top1=top1,
        scored=n_scored,
        criterion=f"greedy top-1 at every non-tied position and cosine >= {MIN_COSINE}",
    )


# -- device runs -------------------------------------------------------------------------------


@contextmanager
def _device_mode(release: str | Release, layout_checks: bool) -> Iterator[None]:
    import spyre_sim

    spyre_sim.register()
    with ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")  # once-per-process device notices (fp32 downcast...)
        stack.enter_context(spyre_sim.use_stack(release))
        stack.enter_context(spyre_sim.configure(layout_checks=layout_checks))
        yield


def _gap_hits(snapshot: Snapshot, error: RunError | None) -> list[GapHit]:
    hits: list[GapHit] = []
    for gap, info in sorted(snapshot.gaps.items()):
        counts = {m: n for m, n in info.module_counts.items() if m}
        if not counts:
            hits.append(GapHit(gap, None, None, info.count))
        for module, count in sorted(counts.items()):
            hits.append(GapHit(gap, None, module or None, int(count)))
    if error is not None and error.gap is not None:
        hits = [h for h in hits if not (h.gap == error.gap and h.module_path == error.module_path)]
        hits.append(GapHit(error.gap, error.op, error.module_path, 1, raised=True))
    return hits


def _error_of(exc: BaseException) -> RunError:
    from spyre_sim.errors import SpyreLoweringError

    # torch wraps errors raised while moving parameters ("_apply(): Couldn't swap
    # Conv2d.weight"): the lowering error that caused it is the verdict.
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, SpyreLoweringError):
        cause = cause.__cause__ or cause.__context__
    if cause is not None:
        exc = cause
    if isinstance(exc, SpyreLoweringError):
        return RunError("lowering", type(exc).__name__, str(exc), exc.gap, exc.op, exc.module_path)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return RunError("other", type(exc).__name__, text[:2000])


def _prepared_copy(
    built: BuiltFamily,
    release: str | Release,
    registry: Registry | None,
    adapters: bool,
    auto_retire: bool,
    extra: Sequence[tuple[str, Adapter]] = (),
) -> tuple[nn.Module, list[str], dict[str, str], list[ModelEdit]]:
    import torch

    from spyre_adapters.contract import ModelEdit

    model = copy.deepcopy(built.model).to(torch.float16)
    names: list[str] = []
    not_applied: dict[str, str] = {}
    if adapters:
        from spyre_adapters import prepare

        prepared = prepare(model, stack=release, registry=registry, auto_retire=auto_retire)
        names = [f"{a.name} {a.version}" for a in prepared.applied]
        not_applied.update(dict.fromkeys(prepared.skipped, "does not match this model"))
        at = prepared.release
        not_applied.update(dict.fromkeys(prepared.retired, f"retired at {at}"))
        not_applied.update(dict.fromkeys(prepared.out_of_range, f"out of range at {at}"))
    edits: list[ModelEdit] = []
    for label, adapter in extra:
        edit = ModelEdit(model)
        edits.append(edit)
        adapter.apply(model, edit)
        names.append(label)
    return model, names, not_applied, edits


def run_on_device(
    built: BuiltFamily,
    release: str | Release,
    *,
    adapters: bool,
    registry: Registry | None = None,
    layout_checks: bool = True,
    list_all_gaps: bool = True,
    auto_retire: bool = True,
    extra: Sequence[tuple[str, Adapter]] = (),
    modes: Sequence[AbstractContextManager[Any]] = (),
) -> DeviceRun:
    """Run ``built`` on the device at ``release`` (a name, or a release object), in fp16,
    stock or with the adapters resolved by ``registry`` (default: the installed ones), and
    compare with the CPU reference.

    ``extra``: ``(label, adapter)`` pairs applied after the resolved ones (an adapter that is
    not installed yet, e.g. the op bridges ``spyre-adapters bridge`` is validating), named by
    their labels in ``adapters``; ``modes``: context managers (torch modes) entered around the
    device forward only.
    """
    start = time.perf_counter()
    edits: list[ModelEdit] = []
    try:
        model, names, not_applied, edits = _prepared_copy(
            built, release, registry, adapters, auto_retire, extra
        )
    except Exception as exc:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return DeviceRun(
            ran=False,
            error=RunError("prepare", type(exc).__name__, text[:2000]),
            seconds=time.perf_counter() - start,
        )
    try:
        return _device_run(
            built, model, release, names, not_applied, layout_checks, list_all_gaps, modes, registry
        )
    finally:
        for edit in reversed(edits):
            edit.rollback()
        if adapters:  # adapters may rebind module-level functions: undo before the next run
            from spyre_adapters import restore

            restore(model)


def _device_run(
    built: BuiltFamily,
    model: nn.Module,
    release: str | Release,
    names: list[str],
    not_applied: dict[str, str],
    layout_checks: bool,
    list_all_gaps: bool,
    modes: Sequence[AbstractContextManager[Any]] = (),
    registry: Registry | None = None,
) -> DeviceRun:
    from spyre_sim import telemetry

    start = time.perf_counter()
    error: RunError | None = None
    output: torch.Tensor | None = None
    from spyre_adapters.library.op_bridge import observe, op_name

    bridged: dict[str, int] = {}

    def count(op: Any, args: Any, kwargs: Any) -> None:
        name = op_name(op)
        bridged[name] = bridged.get(name, 0) + 1

    with _device_mode(release, layout_checks), telemetry.record() as recording:
        try:
            model.to("spyre")
            with ExitStack() as entered:
                entered.enter_context(observe(count))
                for mode in modes:
                    entered.enter_context(mode)
                output = built.run(model, "spyre").cpu().float()
        except Exception as exc:
            error = _error_of(exc)
    snapshot = recording.snapshot
    run = DeviceRun(
        ran=error is None,
        error=error,
        gaps=_gap_hits(snapshot, error),
        fallbacks=dict(snapshot.fallbacks),
        miscompiles=sorted(snapshot.miscompiles),
        adapters=names,
        not_applied=not_applied,
        all_gaps_listed=error is None,
        bridged=dict(sorted(bridged.items())),
        idle=_idle_bridges(model, names, bridged, registry),
    )
    if output is not None:
        run.comparison = compare(built.kind, built.reference, output)
    if error is not None and error.kind == "lowering" and list_all_gaps:
        run.gaps, run.all_gaps_listed = _all_gaps(built, model, release, layout_checks, error)
    run.seconds = time.perf_counter() - start
    return run


def _idle_bridges(
    model: nn.Module,
    names: Sequence[str],
    bridged: Mapping[str, int],
    registry: Registry | None,
) -> list[str]:
    """The applied op-bridge adapters (``name version`` labels) none of whose ops was bridged."""
    from spyre_adapters import default_registry
    from spyre_adapters.preparation import applied

    records = applied(model)
    labels = {f"{r.name} {r.version}" for r in records}
    registry = default_registry() if registry is None else registry
    idle = []
    for label in names:
        if label not in labels:
            continue
        name, _, version = label.partition(" ")
        try:
            manifest = registry.get(name, version)
        except Exception:
            continue
        if manifest.bridges and not any(b.op in bridged for b in manifest.bridges):
            idle.append(label)
    return idle


def step_past(release: Release, error: RunError, layout: bool) -> Release:
    """``release`` with the gap of ``error`` turned into a host fallback (op rules) or switched
    off (layout rules), so a triage run can continue past it and meet the next gap."""
    import dataclasses

    from spyre_sim.catalogue import Decision, GapState, OpRule

    gap = str(error.gap)
    states = dict(release.gap_states)
    rules = dict(release.op_rules)
    if layout:
        states[gap] = GapState.CLOSED
    else:
        note = "triage: run on the host to find the next gap"
        if error.op:
            rules[error.op] = OpRule(Decision.FALLBACK, gap, note)
        for key, rule in release.op_rules.items():
            if rule.gap == gap and rule.decision is Decision.UNSUPPORTED:
                rules[key] = OpRule(Decision.FALLBACK, gap, note)
        if states.get(gap) is GapState.OPEN:
            states[gap] = GapState.FALLBACK
    return dataclasses.replace(
        release,
        source=f"{release.source} + triage past {gap}:{error.op}",
        gap_states=states,
        op_rules=rules,
    )


#: At most this many gaps are stepped past when listing every gap of a failing run.
MAX_GAPS_LISTED = 12


def _all_gaps(
    built: BuiltFamily,
    model: nn.Module,
    release: str | Release,
    layout_checks: bool,
    error: RunError,
) -> tuple[list[GapHit], bool]:
    """List every gap on the path of a failed run: step past each raised gap (as a host
    fallback, or with its layout rule off) and run again, until the run completes.
    Returns the hits (the ones that raised marked ``raised``) and whether the list is complete.
    """
    import spyre_sim
    from spyre_sim import telemetry

    current = spyre_sim.resolve_stack(release)
    raised: list[RunError] = [error]
    snapshot = telemetry.Snapshot()
    complete = False
    last_exc: BaseException | None = None
    for _ in range(MAX_GAPS_LISTED):
        current = step_past(current, raised[-1], raised[-1].type == "SpyreLayoutError")
        with _device_mode(current, layout_checks), telemetry.record() as recording:
            try:
                model.to("spyre")
                built.run(model, "spyre").cpu().float()
                complete = True
            except Exception as exc:
                last_exc = exc
        snapshot = recording.snapshot
        if complete or last_exc is None:
            break
        step = _error_of(last_exc)
        if step.kind != "lowering" or step.gap is None or step in raised:
            break
        raised.append(step)
        last_exc = None
    raised_keys = {(e.gap, e.module_path) for e in raised}
    hits = [
        GapHit(h.gap, h.op, h.module_path, h.count, raised=(h.gap, h.module_path) in raised_keys)
        for h in _gap_hits(snapshot, None)
    ]
    for e in raised:
        if not any(h.gap == e.gap and h.module_path == e.module_path for h in hits):
            hits.append(GapHit(str(e.gap), e.op, e.module_path, 1, raised=True))
        else:
            hits = [
                GapHit(h.gap, e.op, h.module_path, h.count, True)
                if (h.gap, h.module_path) == (e.gap, e.module_path)
                else h
                for h in hits
            ]
    return hits, complete


# -- classification ----------------------------------------------------------------------------


def classify(
    stock: DeviceRun, adapted: DeviceRun | None, bridging: Mapping[str, Sequence[str]]
) -> tuple[Category, str]:
    """The verdict for a family at a release from its stock and adapted runs.

    ``bridging`` maps each gap met to the registered adapters whose manifests list it (empty:
    no adapter bridges it). ``adapted`` is ``None`` when the stock run already ran and matched.
    """
    if stock.ok:
        return Category.NATIVE, "runs and matches the CPU without adapters"
    if adapted is None:
        return _failed(stock, bridging, with_adapters=False)
    if adapted.error is not None and adapted.error.kind == "prepare":
        return Category.ADAPTER_FAILED, adapted.error.message.splitlines()[0]
    if adapted.ok:
        used = ", ".join(adapted.working) or "no adapter"
        return Category.ADAPTED, f"runs and matches the CPU with {used}"
    return _failed(adapted, bridging, with_adapters=True)


def _failed(
    run: DeviceRun, bridging: Mapping[str, Sequence[str]], *, with_adapters: bool
) -> tuple[Category, str]:
    where = "with adapters" if with_adapters else "stock"
    if run.ran:
        comparison = run.comparison
        facts = (
            f"cosine {comparison.cosine:.4f}, top-1 {comparison.top1}"
            if comparison is not None
            else "no comparison"
        )
        miscompiled = f"; miscompiles: {', '.join(run.miscompiles)}" if run.miscompiles else ""
        return Category.MISMATCH, f"runs {where} but does not match the CPU ({facts}){miscompiled}"
    error = run.error
    assert error is not None
    if error.kind != "lowering" or error.gap is None:
        return Category.DEVICE_ERROR, f"{where}: {error.message.splitlines()[0]}"
    at = f"{error.op} in {error.module_path or '?'}"
    bridges = list(bridging.get(error.gap, ()))
    if bridges:
        why = "; ".join(
            f"{name}: {run.not_applied.get(name, 'applied, but the gap remains')}"
            for name in bridges
        )
        return (
            Category.NOT_IMPLEMENTED_ADAPTER,
            f"gap `{error.gap}` ({at}) is listed by {', '.join(bridges)} ({why}) {where}",
        )
    return Category.BLOCKED, f"gap `{error.gap}` ({at}) has no adapter"


# -- suggestions -------------------------------------------------------------------------------


def suggest_manifest(gap: str, family: str, release: str, hit: GapHit | None = None) -> str:
    """A manifest skeleton (TOML text) for a new adapter bridging ``gap`` for ``family``."""
    where = ""
    if hit is not None:
        where = f" Met at {hit.op or 'an op'} in {hit.module_path or 'the model'} ({family})."
    name = f"{gap}-{family}".replace("_", "-").lower()
    from spyre_sim.catalogue import builtin_catalogue

    info = builtin_catalogue().gaps.get(gap)
    title = f" ({info.title})" if info is not None else ""
    return manifest_skeleton(
        name, [gap], [family], release, summary=f"Bridges `{gap}`{title}.{where}"
    )


# -- entry points ------------------------------------------------------------------------------


def _bridging(registry: Registry, gaps: Sequence[GapHit]) -> dict[str, list[str]]:
    return {
        gap: sorted({m.name for m in registry.bridging(gap)})
        for gap in sorted({h.gap for h in gaps})
    }


def triage(
    built: BuiltFamily,
    release: str | Release,
    *,
    registry: Registry | None = None,
    layout_checks: bool = True,
    list_all_gaps: bool = True,
    stock_all_gaps: bool = True,
    variants: Sequence[BuiltFamily] = (),
) -> TriageResult:
    """Triage an already built family at one release (a name, or a release object).

    ``list_all_gaps``: list every gap of a failing run, not only the first (costs one forward
    per gap); ``stock_all_gaps=False`` does so for the adapted run only (what blocks it).
    ``variants``: the same family built at size variants (:func:`build_variants`), checked
    when the family is enabled (see the module docstring).
    """
    from spyre_adapters import default_registry

    registry = default_registry() if registry is None else registry
    start = time.perf_counter()
    stock = run_on_device(
        built,
        release,
        adapters=False,
        layout_checks=layout_checks,
        list_all_gaps=list_all_gaps and stock_all_gaps,
    )
    adapted = None
    if not stock.ok:
        adapted = run_on_device(
            built,
            release,
            adapters=True,
            registry=registry,
            layout_checks=layout_checks,
            list_all_gaps=list_all_gaps,
        )
    met = stock.gaps + (adapted.gaps if adapted is not None else [])
    bridging = _bridging(registry, met)
    category, detail = classify(stock, adapted, bridging)
    final = adapted if adapted is not None else stock
    blockers = [] if category.enabled else [h for h in final.gaps if h.raised]
    checks: list[VariantCheck] = []
    if category.enabled:
        checks = [_check_variant(v, release, category, registry, layout_checks) for v in variants]
        failed = [c for c in checks if not c.ok]
        if failed:
            detail += "; but at " + "; at ".join(f"{c.preset}: {c.detail}" for c in failed)
    name = release if isinstance(release, str) else release.name
    suggestions = {
        h.gap: suggest_manifest(h.gap, built.model_type, name, h)
        for h in blockers
        if not bridging.get(h.gap)
    }
    return TriageResult(
        family=built.model_type,
        release=name,
        preset=built.preset.name,
        category=category,
        detail=detail,
        kind=built.kind,
        stock=stock,
        adapted=adapted,
        bridging=bridging,
        blockers=blockers,
        suggestions=suggestions,
        seconds=time.perf_counter() - start,
        fit=built.fit,
        variants=checks,
    )


def _check_variant(
    variant: BuiltFamily,
    release: str | Release,
    category: Category,
    registry: Registry,
    layout_checks: bool,
) -> VariantCheck:
    adapted = category is Category.ADAPTED
    run = run_on_device(
        variant,
        release,
        adapters=adapted,
        registry=registry,
        layout_checks=layout_checks,
        list_all_gaps=False,
    )
    how = "with adapters" if adapted else "stock"
    if run.ok:
        detail = f"runs {how} and matches the CPU"
    elif run.ran:
        comparison = run.comparison
        facts = (
            f"cosine {comparison.cosine:.4f}, top-1 {comparison.top1}"
            if comparison is not None
            else "no comparison"
        )
        miscompiled = f"; miscompiles: {', '.join(run.miscompiles)}" if run.miscompiles else ""
        detail = f"runs {how} but does not match the CPU ({facts}){miscompiled}"
    else:
        error = run.error
        assert error is not None
        if error.kind == "lowering":
            detail = f"{how}: gap `{error.gap}` ({error.op} in {error.module_path or '?'})"
        else:
            detail = f"{how}: {error.message.splitlines()[0] if error.message else error.type}"
    return VariantCheck(variant.preset.name, run.ok, detail, tuple(run.miscompiles))


def build_variants(
    family: str, *, preset: SizePreset = REALISTIC, variants: Sequence[SizePreset] = VARIANTS
) -> list[BuiltFamily]:
    """``family`` built at each of ``variants`` that builds it differently from ``preset``
    (:func:`~spyre_adapters.enablement.families.variants_for`); variants that do not build are left out.
    Only :data:`~spyre_adapters.enablement.families.REALISTIC` has variants: for another preset, none."""
    from spyre_adapters.enablement.families import build_family

    if preset != REALISTIC:
        return []
    built = []
    for variant in variants_for(family, base=preset, variants=variants):
        try:
            built.append(build_family(family, preset=variant))
        except FamilyBuildError:
            continue
    return built


def triage_family(
    family: str,
    releases: Sequence[str],
    *,
    preset: SizePreset = REALISTIC,
    registry: Registry | None = None,
    layout_checks: bool = True,
    list_all_gaps: bool = True,
    stock_all_gaps: bool = True,
    variants: Sequence[SizePreset] = VARIANTS,
) -> list[TriageResult]:
    """Build ``family`` once (and at its ``variants``, see :func:`build_variants`) and triage
    it at each release. A family that does not build gets ``build-failed`` /
    ``reference-failed`` at every release."""
    from spyre_adapters.enablement.families import build_family

    start = time.perf_counter()
    try:
        built = build_family(family, preset=preset)
    except FamilyBuildError as exc:
        failed_on_cpu = exc.stage in ("forward", "reference")
        category = Category.REFERENCE_FAILED if failed_on_cpu else Category.BUILD_FAILED
        seconds = (time.perf_counter() - start) / max(len(releases), 1)
        return [
            TriageResult(family, r, preset.name, category, str(exc), seconds=seconds)
            for r in releases
        ]
    variant_builds = build_variants(family, preset=preset, variants=variants)
    build_share = (time.perf_counter() - start) / max(len(releases), 1)
    results = []
    for release in releases:
        result = triage(
            built,
            release,
            registry=registry,
            layout_checks=layout_checks,
            list_all_gaps=list_all_gaps,
            stock_all_gaps=stock_all_gaps,
            variants=variant_builds,
        )
        result.seconds += build_share
        results.append(result)
    return results
