"""The verdict of triage: a :class:`~spyre_adapters.enablement.results.Category` and its detail.

:func:`classify` turns the stock and adapted runs of a family at a release into the verdict;
it is the one function the CLI, the sweep and the pytest-xdist sweep items share.
:func:`describe_run` says in one line how a run went (a size variant's detail).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spyre_adapters.agreement import facts
from spyre_adapters.enablement.results import Category, DeviceRun

__all__ = ["classify", "describe_run"]


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
        return Category.MISMATCH, _mismatch(run, where)
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


def _mismatch(run: DeviceRun, how: str) -> str:
    miscompiled = f"; miscompiles: {', '.join(run.miscompiles)}" if run.miscompiles else ""
    return (
        f"runs {how} but does not match the CPU ({facts(run.comparison)}){miscompiled}"
        + _rounding(run)
        + _limits(run)
    )


def _limits(run: DeviceRun) -> str:
    """The emulator's own limits met on the way (empty when none was): a mismatch after them
    is not evidence about the device."""
    if not run.emulator_limits:
        return ""
    met = ", ".join(f"{kind} x{count}" for kind, count in sorted(run.emulator_limits.items()))
    return (
        f"; emulator limits: {met} (values the device holds that the emulator's fp16 host "
        "tensors cannot: the emulator's limit, not the device's answer)"
    )


def _rounding(run: DeviceRun) -> str:
    """What the selections rounding decided say about a mismatch (empty when none was)."""
    if not run.rounding_ties:
        return ""
    ties = ", ".join(f"{op} x{rows}" for op, rows in sorted(run.rounding_ties.items()))
    said = f"; selections decided within one DL16 step: {ties} rows"
    if run.replayed is None:
        return said
    verdict = "matches" if run.replayed.matches else "still does not match"
    return (
        f"{said}; with the CPU's choice at the {run.replayed_rows} rows that chose otherwise it "
        f"{verdict} ({facts(run.replayed)})"
        + (
            ": precision, rounding's choice was the whole difference"
            if run.replayed.matches
            else ""
        )
    )


def describe_run(run: DeviceRun, how: str) -> str:
    """How ``run`` went, in one line; ``how`` says how it ran (``stock``, ``with adapters``)."""
    if run.ok:
        return f"runs {how} and matches the CPU"
    if run.ran:
        return _mismatch(run, how)
    error = run.error
    assert error is not None
    if error.kind == "lowering":
        return f"{how}: gap `{error.gap}` ({error.op} in {error.module_path or '?'})"
    return f"{how}: {error.message.splitlines()[0] if error.message else error.type}"
