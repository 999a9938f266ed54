"""The terminal summary of a ``--spyre`` run, written through pytest's terminal reporter."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pytest_spyre.record import FAILURE_CLASSES, TestRecord, tally
from spyre_sim.catalogue import GapState
from spyre_sim.miscompile import POOL_PLANNING

if TYPE_CHECKING:
    from pytest_spyre.session import DeviceSession

__all__ = ["write"]

_SHOWN = 8  # entries per line before "and N more"


def _tests(n: int) -> str:
    return f"{n} test{'s' if n != 1 else ''}"


def _listing(items: list[str]) -> str:
    if not items:
        return "none"
    head = ", ".join(items[:_SHOWN])
    return head + (f", and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _per_tests(counter: Counter[str]) -> str:
    return _listing([f"{k} ({_tests(v)})" for k, v in sorted(counter.items(), key=_order)])


def _order(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def write(terminal: Any, session: DeviceSession, records: list[TestRecord]) -> None:
    total = tally(records)
    release = session.release.name
    terminal.write_sep("=", f"spyre summary: stack {release}")
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(total.outcomes.items(), key=_order))
    terminal.write_line(
        f"tests: {total.tests} ({total.on_device} on the device){': ' + outcomes if outcomes else ''}"
    )
    if total.failures:
        classes = ", ".join(
            f"{c} {total.failures[c]}" for c in FAILURE_CLASSES if total.failures[c]
        )
        terminal.write_line(f"failures by class: {classes}")
    terminal.write_line(f"gaps hit: {_per_tests(total.gaps_hit)}")
    if total.blocked:
        terminal.write_line(f"blocked by: {_per_tests(total.blocked)}")
    fallbacks = [
        f"{op} x{count} ({_tests(total.fallback_tests[op])})"
        for op, count in sorted(total.fallbacks.items(), key=_order)
    ]
    terminal.write_line(f"fallbacks: {_listing(fallbacks)}")
    pool = ""
    if not POOL_PLANNING and session.release.gap_states.get("mem-pool") is GapState.MISCOMPILED:
        pool = " (HBM_POOL_PLANNING=0: the stack's pool planning is off, and with it `mem-pool`)"
    terminal.write_line(f"miscompiles: {_per_tests(total.miscompiles)}{pool}")
    if total.emulator_limits:
        terminal.write_line(
            f"emulator limits: {_per_tests(total.emulator_limits)} (DL16 numbers the emulator's "
            "fp16 host tensors cannot hold: from there on its results are not the device's)"
        )
    if total.rounding_ties:
        terminal.write_line(
            f"selections within one DL16 step: {_per_tests(total.rounding_ties)} (top-k or "
            "argmax rows whose candidates rounding may order either way: precision, not a gap)"
        )
    if total.nan_made:
        terminal.write_line(
            f"NaN made on the device: {_per_tests(total.nan_made)} (results holding NaN their "
            "operands did not, e.g. 0/0 once DL16 stored tiny numbers as zero: precision)"
        )
    terminal.write_line(f"adapters applied: {_per_tests(total.adapters)}")
    if total.adapter_errors:
        terminal.write_line(f"adapters that failed to prepare: {_per_tests(total.adapter_errors)}")
    view = session.adapters
    retired = [f"{a['name']} {a['version']}" for a in view.retirable if a["status"] == "retired"]
    retirable = [f"{a['name']} {a['version']}" for a in view.retirable if a["status"] != "retired"]
    if retired:
        terminal.write_line(
            f"adapters retired at {release} (every gap closed; not applied): {_listing(retired)}"
        )
    if retirable:
        terminal.write_line(
            f"adapters retirable at {release} (every gap closed, still applied): "
            f"{_listing(retirable)}"
        )
    if retired or retirable:
        terminal.write_line(f"  see `spyre-adapters audit --stack {release}`")
    terminal.write_line(
        f"harness ops: {total.harness_ops} (the tests' own work on device tensors, "
        + ("host semantics, not judged" if session.options.harness == "host"
           else "judged like model ops")
        + ")"
    )  # fmt: skip
    if total.inference_only:
        terminal.write_line(
            f"inference-only: {_tests(total.inference_only)} skipped (backward on the device)"
        )
    for nodeid in total.gap_closed:
        terminal.write_line(f"gap closed, remove spyre_xfail marker: {nodeid}")
    if total.expectations:
        terminal.write_line(
            "expectations: " + ", ".join(f"{k} {v}" for k, v in sorted(total.expectations.items()))
        )
    if session.options.compare:
        if total.worst is None:
            terminal.write_line("worst agreement with CPU: no model forward was compared")
        else:
            nodeid, worst = total.worst
            top1 = "" if worst.top1 is None else f", top-1 {worst.top1:.1%}"
            terminal.write_line(
                f"worst agreement with CPU: cosine {worst.cosine:.6f}, max-abs-diff "
                f"{worst.max_abs_diff:.3g}{top1} ({worst.model} in {nodeid})"
            )
