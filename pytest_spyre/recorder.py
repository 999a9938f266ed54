"""What happened on the device in each test: the per-test record, and why a failure failed.

:class:`TestRecorder` is the plugin object that keeps a :class:`~pytest_spyre.record.TestRecord`
per test in ``item.stash`` and, once the test is finished, in :attr:`TestRecorder.records`:

- the telemetry difference of each phase (setup, call, teardown) -- gaps hit with their module
  paths, fallbacks, miscompiles, harness ops -- measured around the phase itself, so work done
  while pytest renders a report (``repr`` of device tensors in a traceback) is not counted;
- the adapters applied by moving a model to the device, adapters that failed to prepare, and
  with ``--spyre-compare`` the agreement of each top-level forward with a CPU copy;
- for a failing phase, the failure's class (:mod:`pytest_spyre.classify`: gap, precision,
  miscompile, adapter, emulator, platform, unexplained), shown in a ``spyre`` report section with the
  evidence (the gap and where it closes, the measured difference and the device format, ...);
  a documented miscompile that fires in a test gets a section even when the test passed;
- the outcome, as pytest counts it: a test with failed subtests is failed, each failed subtest
  is counted too.
"""

from __future__ import annotations

import copy
from collections.abc import Generator
from typing import Any

import pytest
from torch import nn

import spyre_sim.limits
from pytest_spyre.classify import (
    EMULATOR_LIMITS,
    ONE_CARD_PLATFORM,
    classify,
    limits_after_text,
    nan_text,
    ties_text,
)
from pytest_spyre.inference_only import InferenceOnlySkip
from pytest_spyre.record import Agreement, Blocker, Failure, TestRecord, counted
from pytest_spyre.session import DeviceSession
from spyre_adapters import SpyreAdaptersError
from spyre_adapters.library.op_bridge import observe, op_name
from spyre_sim import InferenceOnlyError, SpyreLoweringError
from spyre_sim.telemetry import OpDecision, Snapshot
from spyre_sim.telemetry import diff as telemetry_diff
from spyre_sim.telemetry import snapshot as telemetry_snapshot

__all__ = ["RECORD_KEY", "TestRecorder", "blocker_text"]

RECORD_KEY = pytest.StashKey[TestRecord]()
_PHASES_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()

#: The telemetry counts a test's record keeps as ``key -> count`` (the same names on
#: :class:`~spyre_sim.telemetry.Snapshot` and :class:`~pytest_spyre.record.TestRecord`).
_COUNTED_PER_TEST = ("miscompiles", "emulator_limits", "rounding_ties", "nan_made")


def _find(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _training_stop(exc: BaseException | None) -> InferenceOnlyError | None:
    """The inference-only error behind ``exc``: backward on the device, or a device error raised
    in a training step (gradients on, model in training mode); None otherwise. A forward that
    computes a loss under ``no_grad`` or in eval mode is inference, judged like any other."""
    if isinstance(exc, InferenceOnlySkip):
        return exc.error
    found = _find(exc, InferenceOnlyError)
    if isinstance(found, InferenceOnlyError):
        return found
    lowering = _find(exc, SpyreLoweringError)
    if isinstance(lowering, SpyreLoweringError) and lowering.in_training:
        return InferenceOnlyError(
            f"a training step (gradients enabled, model in training mode) met the device: "
            f"{str(lowering).splitlines()[0]}"
        )
    return None


def blocker_text(blocker: Blocker, resolved: list[str]) -> str:
    """The ``spyre`` section of a test stopped by a gap."""
    closes = blocker.closes_in or (
        "never (lasting hardware property)" if blocker.lasting else "no known release"
    )
    lines = [
        f"blocked by gap `{blocker.gap}` at stack {blocker.release}",
        f"  op:          {blocker.op}",
        f"  module path: {blocker.module_path or '(not inside a module forward)'}",
    ]
    if blocker.runs_from and blocker.runs_from != blocker.closes_in:
        lines.append(f"  runs from:   {blocker.runs_from} (as a cpu-fallback)")
    lines.append(f"  closes in:   {closes}")
    lines.append(
        "  bridged by:  "
        + (", ".join(blocker.bridged_by) if blocker.bridged_by
           else "no registered adapter matches this model for this gap")
    )  # fmt: skip
    applied = [b for b in blocker.bridged_by if b in resolved]
    if applied:
        lines.append(
            f"  note: {', '.join(applied)} is applied but does not cover this use of the gap "
            "(see the hint in the error)"
        )
    return "\n".join(lines)


def _section(failure: Failure, blocker: Blocker | None, resolved: list[str]) -> str:
    if failure.cls == "gap" and blocker is not None:
        return blocker_text(blocker, resolved)
    if failure.cls == "precision" and "check" not in (failure.measured or {}):
        # an exact comparison failed after selections rounding decided (classify)
        return f"precision: {failure.detail}"
    if failure.cls == "precision":
        measured = failure.measured or {}
        narrower = measured.get("device_epsilon") is not None
        return "\n".join([
            "precision: a closeness check failed; "
            + ("the device computes in a narrower format" if narrower else
               "the device kept host dtypes, so the values differ in how they were computed"),
            f"  check:       {measured.get('check')} on {measured.get('dtype')} "
            f"{measured.get('shape')}",
            f"  measured:    max abs diff {measured.get('max_abs_diff'):.3g}, "
            + (f"max rel diff {measured['max_rel_diff']:.3g}, "
               if measured.get("max_rel_diff") is not None else "")
            + f"NaN {measured.get('nan')}",
            f"  tolerance:   atol {measured.get('atol')}, rtol {measured.get('rtol')}",
            f"  device format: {measured.get('device_format')}",
            *([f"  note:        {measured['tolerance_note']}"]
              if measured.get("tolerance_note") else []),
            *([f"  selections:  {ties_text(measured['rounding_ties'])}"]
              if measured.get("rounding_ties") else []),
            *([f"  NaN made:    {nan_text(measured['nan_made'])}"]
              if measured.get("nan_made") else []),
            *([f"  limits:      {limits_after_text(measured['limits_after'])}"]
              if measured.get("limits_after") else []),
        ])  # fmt: skip
    if failure.cls == "miscompile":
        return f"miscompile: {failure.detail}"
    if failure.cls == "adapter":
        return f"adapter failure: {failure.detail}"
    if failure.cls == "emulator":
        if failure.detail.startswith(EMULATOR_LIMITS):
            return (
                "emulator limit (what the emulated device does not reproduce; not a gap of "
                f"the stack, not a bug): {failure.detail}"
            )
        return f"emulator defect (a bug of the emulated device or the plugin): {failure.detail}"
    if failure.cls == "platform":
        if failure.detail.startswith(ONE_CARD_PLATFORM):
            return f"platform (not a gap of the stack): the test {failure.detail}"
        return (
            "platform: code outside the project refuses the spyre device type (not a gap of "
            f"the stack; no out-of-tree device runs this): {failure.detail}"
        )
    return f"unexplained failure on the device: {failure.detail}"


class TestRecorder:
    """Per-test records of one run (see the module docstring)."""

    __test__ = False

    def __init__(self, session: DeviceSession) -> None:
        self.session = session
        self.records: dict[str, TestRecord] = {}
        self._open: dict[str, TestRecord] = {}
        self._phases: dict[str, dict[str, pytest.TestReport]] = {}
        #: nodeid -> the telemetry at the start of its running phase (see _so_far)
        self._running: dict[str, Snapshot] = {}
        self._current: TestRecord | None = None
        session.on_applied = self._applied
        session.on_agreement = self._agreement
        session.on_adapter_error = self._adapter_error

    # -- callbacks from the device session ---------------------------------------------------
    def _applied(self, model: nn.Module, applied: list[str]) -> None:
        rec = self._current
        if rec is not None:
            rec.adapters.extend(a for a in applied if a not in rec.adapters)

    def _agreement(self, value: Agreement) -> None:
        if self._current is not None:
            self._current.compare.append(value)

    def _adapter_error(self, what: str) -> None:
        if self._current is not None and what not in self._current.adapter_errors:
            self._current.adapter_errors.append(what)

    # -- phases ---------------------------------------------------------------------------------
    def _fold(self, rec: TestRecord, before: Snapshot) -> None:
        delta = telemetry_diff(telemetry_snapshot(), before)
        for gap, entry in delta.gaps.items():
            rec.gaps[gap] = rec.gaps.get(gap, 0) + entry.count
            paths = rec.gap_modules.setdefault(gap, [])
            paths.extend(p for p in entry.modules if p not in paths)
        for gap, count in delta.errors.items():
            rec.gaps.setdefault(gap, 0)
            if gap not in delta.gaps:
                rec.gaps[gap] += count
        for op, count in delta.fallbacks.items():
            rec.fallbacks[op] = rec.fallbacks.get(op, 0) + count
        for name in _COUNTED_PER_TEST:  # the record keeps their counts, not their modules
            counts: dict[str, int] = getattr(rec, name)
            for key, entry in getattr(delta, name).items():
                counts[key] = counts.get(key, 0) + entry.count
        for op, entry in delta.nan_made.items():
            paths = rec.nan_modules.setdefault(op, [])
            paths.extend(p for p in entry.modules if p not in paths)
        rec.harness_ops += delta.ops_decided(OpDecision.HARNESS)

    def _phase(self, item: pytest.Item) -> Generator[None, Any, Any]:
        rec = item.stash[RECORD_KEY]
        before = telemetry_snapshot()

        def bridged(op: Any, args: Any, kwargs: Any) -> None:
            name = op_name(op)
            rec.bridged[name] = rec.bridged.get(name, 0) + 1

        self._running[item.nodeid] = before
        try:
            with observe(bridged):
                return (yield)
        finally:
            del self._running[item.nodeid]
            self._fold(rec, before)

    def _so_far(self, nodeid: str, rec: TestRecord) -> TestRecord:
        """``rec`` with what its running phase has recorded so far. A phase is folded into the
        record when it ends, but a subtest's report is made while its test runs: classified
        from ``rec`` alone, a subtest failing on a dtype check after float32 was stored as
        float16 in the same phase found no ``fp32-storage`` in it (Transformers 5.25's
        ``test_keep_in_fp32_modules_strict_also_hardcode_fp32``: ``unexplained``)."""
        before = self._running.get(nodeid)
        if before is None:
            return rec
        seen = copy.deepcopy(rec)
        self._fold(seen, before)
        return seen

    def _drop_idle_bridges(self, rec: TestRecord) -> None:
        """An op bridge is applied to every model (it matches any), but it is part of a test's
        story only where it computed a call: the others are left out of ``adapters``."""
        registry = self.session.adapters.registry
        kept = []
        for label in rec.adapters:
            name, _, version = label.rpartition(" ")
            try:
                manifest = registry.get(name, version)
            except SpyreAdaptersError:  # not a registered label: keep it as it is
                kept.append(label)
                continue
            ops = {bridge.op for bridge in manifest.bridges}
            if not ops or ops & set(rec.bridged):
                kept.append(label)
        rec.adapters[:] = kept

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        on_host = item.get_closest_marker("no_spyre") is not None
        rec = TestRecord(item.nodeid, on_device=not on_host)
        item.stash[RECORD_KEY] = rec
        self._open[item.nodeid] = rec
        self._phases[item.nodeid] = {}
        self._current = rec
        self.session.closeness.reset()
        spyre_sim.limits.reset()
        if self.session.placement is not None:
            self.session.placement.enabled = not on_host
        return (yield from self._phase(item))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._phase(item))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        try:
            return (yield from self._phase(item))
        finally:
            self._drop_idle_bridges(item.stash[RECORD_KEY])
            self._current = None
            if self.session.placement is not None:
                self.session.placement.enabled = True

    @pytest.hookimpl(specname="pytest_runtest_makereport")
    def pytest_runtest_makereport_training_stop(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> None:
        """A training step stopped by the device becomes a skip before the report is built.

        pytest renders the traceback of a failure when it builds the report (through a
        model's frames, about a second per test) and :meth:`pytest_runtest_makereport` would
        then replace it with the skip reason. A plain hook implementation runs after
        ``unittest``'s (``tryfirst``: it moves a ``TestCase``'s error into ``call``) and
        before the default one, which then builds a skip report from the location alone."""
        if call.excinfo is None or RECORD_KEY not in item.stash:
            return
        exc = call.excinfo.value
        if isinstance(exc, InferenceOnlySkip):
            return
        stop = _training_stop(exc)
        if stop is None:
            return
        try:
            raise InferenceOnlySkip(stop) from exc
        except InferenceOnlySkip:
            call.excinfo = pytest.ExceptionInfo.from_current()

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rec = item.stash.get(RECORD_KEY, None)
        if rec is not None and call.when == "teardown":  # JUnit XML reads them from the report
            item.user_properties.extend(rec.properties())
        report: pytest.TestReport = yield
        if rec is None:
            return report
        exc = call.excinfo.value if call.excinfo is not None else None
        stop = _training_stop(exc)
        if stop is not None:
            rec.inference_only = True
            if report.failed or report.skipped:
                # skipped: by the guard, or made a skip by pytest_runtest_makereport_training_stop
                # (a training forward stopped by a gap); a unittest-style test reports the
                # guard's skip where it was raised, with the exception's class. Say it at the
                # test, plainly (failed: should a hook of another plugin have rebuilt it).
                report.outcome = "skipped"
                report.longrepr = (str(item.path), item.location[1] or 0,
                                   str(InferenceOnlySkip(stop).msg))  # fmt: skip
            return report
        if report.failed:
            seen = self._so_far(item.nodeid, rec)
            failure = classify(exc, seen, self.session.closeness.failures,
                               self.session.device_format,
                               self.session.device_epsilon)  # fmt: skip
            blocker = None
            lowering = _find(exc, SpyreLoweringError)
            if isinstance(lowering, SpyreLoweringError):
                blocker = self._blocker(lowering)
                if rec.blocked_by is None:
                    rec.blocked_by = blocker
            if rec.failure is None:
                rec.failure = failure
            report.sections.append(
                ("spyre", _section(failure, blocker, self.session.adapters.resolved))
            )
        elif rec.miscompiles and call.when == "call":
            report.sections.append((
                "spyre",
                "miscompile: the device reproduced documented wrong numbers in this test ("
                + counted(rec.miscompiles)
                + ") and the test passed: its checks did not look at them",
            ))  # fmt: skip
        elif rec.emulator_limits and call.when == "call":
            report.sections.append((
                "spyre",
                "emulator limit: a DL16 number the emulator's fp16 host tensors cannot hold was "
                "lost in this test ("
                + counted(rec.emulator_limits)
                + "); the test passed, but from there on the emulator's results are not the "
                "device's",
            ))  # fmt: skip
        return report

    def _blocker(self, error: SpyreLoweringError) -> Blocker:
        return Blocker(
            gap=error.gap, op=error.op, release=error.release, module_path=error.module_path,
            closes_in=error.closes_in, lasting=error.lasting, message=str(error).split("\n")[0],
            bridged_by=self.session.bridges.get(error, []), runs_from=error.runs_from,
        )  # fmt: skip

    # -- outcomes -------------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = self._open.get(report.nodeid)
        if rec is None:
            return
        if hasattr(report, "context"):  # a subtest's report (pytest's SubtestReport)
            if report.failed:
                rec.subtests_failed += 1
            return
        self._phases[report.nodeid][report.when] = report

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        rec = self._open.pop(nodeid, None)
        if rec is None:
            return
        rec.outcome = _outcome(self._phases.pop(nodeid, {}), rec.subtests_failed)
        self.records[nodeid] = rec


def _outcome(phases: dict[str, pytest.TestReport], subtests_failed: int) -> str:
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if setup is not None and setup.failed:
        return "error"
    for report in (setup, call):
        if report is not None and report.skipped:
            return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if call is not None and (call.failed or subtests_failed):
        return "failed"
    if teardown is not None and teardown.failed:
        return "error"
    if call is not None and hasattr(call, "wasxfail"):
        return "xpassed"
    return "passed"
