"""The lowering decision: what the active release does with one op call, and its errors.

:func:`decide` gives the :class:`Verdict` of an op call (the decision of the op's catalogue
rule, the first layout or capability rule of :mod:`spyre_sim.layout` it breaks, the
miscompiles of :mod:`spyre_sim.miscompile` the release reproduces); :func:`make_error` builds
the :class:`~spyre_sim.errors.SpyreLoweringError` for a refused op, naming the gap, where it
closes and the module path; :func:`apply_miscompiles` applies a verdict's miscompiles to a
result. Caching the verdicts is the hot path's business (:mod:`spyre_sim._dispatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from spyre_sim import _modules, hints, layout, miscompile, scope, telemetry
from spyre_sim._miscompile_registry import Unheld
from spyre_sim.catalogue import UNLOWERED_GAP, Decision, GapState, Release, catalogue_for
from spyre_sim.errors import SpyreLayoutError, SpyreLoweringError
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo


class Verdict:
    """The cached outcome of deciding one op call."""

    __slots__ = (
        "by_op_rule",
        "decision",
        "decompose",
        "error",
        "gap",
        "marks",
        "miscompiles",
        "value",
    )

    def __init__(
        self,
        decision: Decision,
        gap: str | None,
        error: tuple[str, str, type[SpyreLoweringError]] | None = None,
        miscompiles: tuple[miscompile.Miscompile, ...] = (),
        marks: tuple[miscompile.Mark, ...] = (),
    ) -> None:
        self.decision = decision
        self.value = decision.value
        self.gap = gap
        self.error = error  # (gap, reason, class)
        self.miscompiles = miscompiles
        self.marks = marks  # marks set on the result for a later op's miscompile
        self.decompose = False  # run the op's CompositeImplicit decomposition instead
        self.by_op_rule = False  # the error is the op's own rule (not a layout/capability rule)


def judged() -> bool:
    """Whether the op being run now gets a verdict: always with ``settings.judge_harness``,
    else only inside the model scope (:mod:`spyre_sim.scope`)."""
    return settings.judge_harness or scope.in_model_scope()


def raise_gap(
    release: Release,
    op: str,
    gap: str,
    tensors: Sequence[torch.Tensor],
    reason: str,
    cls: type[SpyreLoweringError],
) -> None:
    raise make_error(release, op, gap, reason, [(t.dtype, tuple(t.shape)) for t in tensors], cls)


def _training_step(model: torch.nn.Module | None) -> bool:
    """A training step runs: gradients on, the model in training mode with trainable
    parameters (a fresh module that was never put in eval mode but trains nothing is not)."""
    if model is None or not model.training or not torch.is_grad_enabled():
        return False
    return any(p.requires_grad for p in model.parameters())


def make_error(
    release: Release,
    op: str,
    gap: str,
    reason: str,
    sig: Sequence[tuple[torch.dtype, tuple[int, ...]]],
    cls: type[SpyreLoweringError],
    *,
    op_rule: bool = False,
) -> SpyreLoweringError:
    """The error for ``op`` refused at ``release``; ``op_rule``: the op's own catalogue rule
    refused it (so where the op first runs at all is worth saying), not a layout or
    capability rule."""
    catalogue = catalogue_for(release)
    closes_in = catalogue.first_closing(gap, release.name)
    lasting = catalogue.gap(gap).lasting
    runs_from = None
    if op_rule and op.count(".") >= 2:
        packet, _, overload = op.rpartition(".")
        runs_from = catalogue.first_running(packet, release.name, overload)
    path = _modules.current_module_path()
    model = _modules.outermost()
    telemetry.count_gap(gap, path)
    telemetry.count_error(gap)
    error = cls(
        op=op,
        release=release.name,
        gap=gap,
        reason=reason,
        dtypes=[str(d).replace("torch.", "") for d, _ in sig],
        shapes=[tuple(s) for _, s in sig],
        closes_in=closes_in,
        lasting=lasting,
        module_path=path,
        runs_from=runs_from,
        in_training=_training_step(model),
    )
    hints.provide(error, model)
    return error


def decide(info: OpInfo, hargs: Sequence[Any], hkwargs: dict[str, Any]) -> Verdict:
    """The verdict of the active release on one call of the op ``info`` (host arguments)."""
    release = current_stack()
    rule = release.op_rule(info.packet, info.overload)
    decision = rule.decision
    if decision is Decision.UNSUPPORTED and info.packet in _BOOKKEEPING:
        return Verdict(Decision.NATIVE, None)
    if decision is Decision.UNSUPPORTED and rule.gap == UNLOWERED_GAP and _composite(info):
        verdict = Verdict(Decision.DECOMPOSED, None)
        verdict.decompose = True
        return verdict
    if decision is Decision.UNSUPPORTED:
        gap = rule.gap or UNLOWERED_GAP
        reason = "the release has no kernel, decomposition or fallback for it"
        if rule.note:
            reason += f" ({rule.note})"
        verdict = Verdict(decision, gap, (gap, reason, SpyreLoweringError))
        verdict.by_op_rule = True
        return verdict
    if decision is Decision.FALLBACK:
        return Verdict(decision, rule.gap)
    for r in layout.active_rules(release, info.packet, settings.layout_checks):
        broken = r.check(info.packet, hargs, hkwargs)
        if broken is not None:
            text = f"{broken} (real stack: '{r.text}')" if r.text else broken
            cls = SpyreLayoutError if r.layout else SpyreLoweringError
            return Verdict(Decision.UNSUPPORTED, r.gap, (r.gap, text, cls))
    found = []
    for m in miscompile.miscompiles_for(info.packet):
        state = release.gap_state(m.gap)  # an unknown gap id is a bug: it raises
        if state is GapState.MISCOMPILED or (
            decision is Decision.MISCOMPILED and rule.gap == m.gap
        ):
            found.append(m)
    if decision is Decision.MISCOMPILED and not found:
        found.append(miscompile.Miscompile(rule.gap or UNLOWERED_GAP, info.packet, _generic))
    marks = tuple(
        m
        for m in miscompile.marks_for(info.packet)
        if release.gap_state(m.gap) is GapState.MISCOMPILED
    )
    return Verdict(decision, rule.gap, None, tuple(found), marks)


# Ops that only change tensor metadata, never compiled by the stack; a catalogue that does not
# list them must not make them fail (they reach the device under inference_mode).
_BOOKKEEPING = frozenset({"aten.detach_", "aten.detach", "aten.alias", "aten._reshape_alias"})


def _composite(info: OpInfo) -> bool:
    return bool(
        torch._C._dispatch_has_kernel_for_dispatch_key(info.qualname, "CompositeImplicitAutograd")
    )


def _generic(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    return miscompile.generic_corruption(out)


def apply_miscompiles(
    verdict: Verdict, args: Sequence[Any], kwargs: dict[str, Any], out: Any
) -> tuple[Any, list[tuple[str, Any]], Unheld | None]:
    """Apply the verdict's reproductions to the host result ``out``; returns the result, the
    marks to set on its wrapper when no reproduction changed it (``(attribute, value)``), and
    the :class:`~spyre_sim._miscompile_registry.Unheld` of a reproduction that found the
    result right on the device but not held by the emulator's fp16 host tensor (else None)."""
    unheld = None
    for m in verdict.miscompiles:
        wrong = m.apply(args, kwargs, out)
        if isinstance(wrong, Unheld):
            unheld = wrong
            continue
        if wrong is not None:
            path = _modules.current_module_path()
            telemetry.count_miscompile(m.gap, path)
            telemetry.count_gap(m.gap, path)
            return wrong, [], None
    marks = []
    for mark in verdict.marks:
        found = mark.mark(args, kwargs)
        if found is not None:
            marks.append(found)
    return out, marks, unheld
