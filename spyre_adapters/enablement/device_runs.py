"""Device runs: a built family on the emulated device at a release, stock or adapted.

:func:`run_on_device` prepares a copy of the family's model (fp16; with the adapters the
lifecycle resolves at the release, or stock), runs its forward on the ``spyre`` device and
records what the device met (:class:`~spyre_adapters.enablement.results.DeviceRun`): the gaps
with the module path of each, the ops that fell back to the host, the miscompiles, the op
bridges that computed a call, and, when it ran, the comparison with the CPU reference
(:func:`spyre_adapters.agreement.compare`).

A run stops at the first gap that raises; to list *every* gap on the path, a failing run is
repeated at a derived release where each raised gap is stepped past (:func:`step_past`: its op
runs as a host fallback, or its layout rule is off), until the forward completes (at most
:data:`MAX_GAPS_LISTED` steps). Gaps found that way are marked ``raised``: each would stop the
real stack.
"""

from __future__ import annotations

import copy
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from spyre_adapters.enablement.families import BuiltFamily
from spyre_adapters.enablement.results import DeviceRun, GapHit, RunError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from spyre_adapters.contract import Adapter, ModelEdit
    from spyre_adapters.registry import Registry
    from spyre_sim.catalogue import Release
    from spyre_sim.telemetry import Snapshot

__all__ = ["MAX_GAPS_LISTED", "run_on_device", "step_past"]


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
    from spyre_adapters.preparation import applied

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
        miscompiled_in={
            gap: sorted(entry.module_counts) for gap, entry in sorted(snapshot.miscompiles.items())
        },
        touched={f"{r.name} {r.version}": list(r.modules) for r in applied(model)},
        emulator_limits={
            kind: entry.count for kind, entry in sorted(snapshot.emulator_limits.items())
        },
    )
    if output is not None:
        run.comparison = built.compared(output)
        run.rounding_ties = {
            op: entry.in_modules for op, entry in snapshot.rounding_ties.items() if entry.in_modules
        }
        if not run.comparison.matches and run.rounding_ties:
            _replay(built, model, release, layout_checks, run)
    if error is not None and error.kind == "lowering" and list_all_gaps:
        run.gaps, run.all_gaps_listed = _all_gaps(built, model, release, layout_checks, error)
    run.seconds = time.perf_counter() - start
    return run


def _replay(
    built: BuiltFamily,
    model: nn.Module,
    release: str | Release,
    layout_checks: bool,
    run: DeviceRun,
) -> None:
    """A run that did not match the CPU, in which the device decided selections by rounding
    (``run.rounding_ties``), again with the CPU's top-k choice at those rows only
    (:mod:`spyre_sim.selections`): ``run.replayed`` is that comparison (``None`` when the
    calls did not line up or the replay raised) and ``run.replayed_rows`` the rows replayed."""
    from spyre_sim.selections import replaying

    try:
        choices = built.cpu_choices()
        with _device_mode(release, layout_checks), replaying(choices) as replay:
            again = built.run(model, "spyre").cpu().float()
    except Exception:  # the diagnosis failed: the mismatch stands as measured
        return
    if not replay.aligned:
        return
    run.replayed_rows = replay.replaced
    run.replayed = built.compared(again)


def _idle_bridges(
    model: nn.Module,
    names: Sequence[str],
    bridged: Mapping[str, int],
    registry: Registry | None,
) -> list[str]:
    """The applied op-bridge adapters (``name version`` labels) none of whose ops was bridged."""
    from packaging.version import InvalidVersion

    from spyre_adapters import default_registry
    from spyre_adapters.errors import UnknownAdapterError
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
        except (UnknownAdapterError, InvalidVersion):
            continue  # not an installed version: an adapter under validation (``extra``)
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
