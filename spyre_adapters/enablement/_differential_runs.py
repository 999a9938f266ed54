"""Running and judging a built case at a release: :func:`run_case` runs it on the emulated
device with the adapters the lifecycle resolves there, checks the adapted model on the CPU, and
ends in one :class:`Outcome` (the outcomes are documented in
:mod:`spyre_adapters.enablement.differential`), recorded as a :class:`CaseRun`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from spyre_adapters.enablement._differential_cases import Case
from spyre_adapters.enablement.families import BuiltFamily

if TYPE_CHECKING:
    from spyre_adapters.agreement import Comparison
    from spyre_adapters.enablement.results import DeviceRun
    from spyre_adapters.registry import Registry

__all__ = ["PRECISION_COSINE", "CaseRun", "Outcome", "run_case"]


class Outcome(str, enum.Enum):
    """How one run of a case at a release ended (the outcomes are documented in
    :mod:`spyre_adapters.enablement.differential`)."""

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

    ``adapters`` were applied (``name version``) and did something: an op bridge none of
    whose ops the run bridged is in ``idle`` instead (a bridge matches every model);
    ``gap`` is the gap a ``raised`` run names; ``miscompiles`` the gaps whose miscompiles
    telemetry recorded; ``cosine``/``top1`` the comparison with the CPU when it ran (``top1``
    for causal LMs).
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
    idle: tuple[str, ...] = ()

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
            "idle": list(self.idle),
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
            idle=tuple(data.get("idle", ())),
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


class _Dl16Results(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Every floating result is rounded once to DL16, with DL16's own range (no subnormals,
    saturation at about 8.6e9), as the device stores each result it computes: run on the CPU,
    the stock model then meets the device's number format and nothing else of it (no lowering,
    layout rule or adapter). Views are left alone; an op writing an input is rounded in
    place."""

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        import torch
        from torch.utils._pytree import tree_map

        from spyre_sim.numerics import round_wide_in_range

        out = func(*args, **(kwargs or {}))
        if func.is_view:
            return out
        written = func._schema.is_mutable

        def stored(value: Any) -> Any:
            if not isinstance(value, torch.Tensor) or value.dtype is not torch.float32:
                return value
            rounded = round_wide_in_range(value)
            return value.copy_(rounded) if written else rounded

        return tree_map(stored, out)


def _dl16_check(built: BuiltFamily) -> Comparison | None:
    """The stock model on the CPU in fp32 with every result rounded to DL16
    (:class:`_Dl16Results`) against its own fp32 reference; ``None`` when that run raised."""
    import copy

    import torch

    model = copy.deepcopy(built.model)
    try:
        with torch.no_grad(), _Dl16Results():  # type: ignore[no-untyped-call]
            output = built.run(model, "cpu")
    except Exception:
        return None
    return built.compared(output)


def _number_format_explained(built: BuiltFamily, comparison: Comparison) -> str:
    """Why a device mismatch of any size is the device's number format (see :func:`run_case`),
    or ``""``: the stock model with every result rounded to DL16 on the CPU fails the same
    comparison, and the device is at most twice as far from the CPU (``1 - cosine``) as that
    control is. An adapter or emulator fault on top of DL16's own error lands farther off."""
    control = _dl16_check(built)
    if control is None or control.matches:
        return ""
    if 1.0 - comparison.cosine > 2.0 * (1.0 - control.cosine):
        return ""
    return (
        "the stock model with every result rounded to DL16 fails on the CPU too "
        f"({_facts(control)})"
    )


def _cpu_check(
    built: BuiltFamily, release: str, registry: Registry, *, fp16_storage: bool = False
) -> tuple[Comparison | None, str]:
    """The adapted model on the CPU against the stock model's reference: in fp32, or with
    ``fp16_storage`` in fp16 with no fp32 anywhere (:class:`_Fp16Storage`). ``None`` and the
    error when the run raised."""
    import copy
    from contextlib import nullcontext

    import torch

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
    return built.compared(output), ""


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
    resolves there, compare it with the CPU and say how it ended (see
    :mod:`spyre_adapters.enablement.differential`).

    The adapted model is also run on the CPU in fp32: an adapter must not change what the
    model computes, whatever the device does (``cpu-mismatch``; this also checks adapters
    that are only applied at releases where nothing runs on the device). A device mismatch
    that nothing reports, within :data:`PRECISION_COSINE` of the CPU, is ``precision`` when
    one of two controls explains it: the adapted model run on the CPU in fp16 with no fp32
    anywhere fails the same comparison (the device stores fp32 as fp16: a model that computes
    its attention scores in fp32, as GPT-Neo does, loses that on any fp16-only machine); or
    the device run with DL16 rounding off (plain fp16 storage) matches. A mismatch of any
    size is ``precision`` when the stock model on the CPU with every result rounded to DL16
    fails the same comparison and the device is at most twice as far from the CPU as that
    (:func:`_number_format_explained`): DL16 holds half of fp16's fraction bits, and a model
    whose unscaled attention scores reach tens (T5-style, heads of 128) is that far off on
    any DL16 machine.
    """
    from spyre_adapters.enablement.device_runs import run_on_device
    from spyre_adapters.preparation import default_registry

    registry = default_registry() if registry is None else registry
    run = run_on_device(built, release, adapters=True, registry=registry, list_all_gaps=False)
    idle = tuple(run.idle)
    adapters = tuple(label for label in run.adapters if label not in idle)
    return dataclasses.replace(_judged(case, built, release, registry, run, adapters), idle=idle)


def _judged(
    case: Case,
    built: BuiltFamily,
    release: str,
    registry: Registry,
    run: DeviceRun,
    adapters: tuple[str, ...],
) -> CaseRun:
    """How ``run`` (the device run of :func:`run_case`) ended, as a :class:`CaseRun`."""
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
    bridged = {
        gap: label
        for label in adapters
        for gap in registry.get(*label.split(" ", 1)).gaps
        if gap in miscompiles and run.covers(label, gap)
    }
    if error is not None:
        first = error.message.splitlines()[0] if error.message else error.type
        if error.kind == "lowering":
            return CaseRun(case, release, Outcome.RAISED, first, adapters, error.gap, miscompiles)
        if not miscompiles:
            return CaseRun(case, release, Outcome.ERROR, f"run: {first}", adapters)
        # a documented miscompile came first, and its wrong numbers can make what follows
        # fail (a length read from a zeroed sum sizes a buffer): reported, so not silent
        if not bridged:
            detail = f"run: {first}; after miscompiles: {', '.join(miscompiles)}"
            return CaseRun(case, release, Outcome.FLAGGED, detail, adapters, None, miscompiles)
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
        explained = ""
        if comparison.cosine >= PRECISION_COSINE:
            explained = _precision_explained(built, release, registry)
        if not explained:
            explained = _number_format_explained(built, comparison)
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
