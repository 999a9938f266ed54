"""One ``--spyre`` run: the device settings, the adapters, and the per-test hooks.

Imported only when the device is on (it imports torch, ``spyre_sim`` and ``spyre_adapters``).
:class:`SpyreRun` is registered as a plugin object by :mod:`pytest_spyre.plugin`, so its
``pytest_*`` methods are hooks of this run only.

Per test (setup + call + teardown) it records, in a :class:`~pytest_spyre.record.TestRecord`:
the telemetry difference (gaps hit, fallbacks, miscompiles), the adapters applied by moving a
model to the device, the device error that blocked the test, and with ``--spyre-compare`` the
agreement of each top-level forward with a CPU copy. Outcomes it changes:

- a ``SpyreLoweringError`` anywhere in a failure's exception chain gets a ``spyre`` report
  section (gap, op, module path, release, first closing release, bridging adapters);
- an ``InferenceOnlyError`` (backward on the device) turns the test into a *skip* whose reason
  says the device is inference-only: the test asks for something the device does not offer,
  which is not a defect of the model or its adapters;
- ``spyre_xfail(gap=G)``: see :meth:`SpyreRun._apply_xfail_gap`.

Under ``pytest-xdist`` each worker sends its records through ``workeroutput``; the controller
merges them, so its summary and JSON report equal a serial run's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from types import ModuleType
from typing import Any

import pytest
from torch import nn

from pytest_spyre import report as report_mod
from pytest_spyre import summary as summary_mod
from pytest_spyre.adapters import AdapterView
from pytest_spyre.inference_only import (
    BackwardGuard,
    InferenceOnlySkip,
    in_backward,
    is_training_op,
    skip_reason,
)
from pytest_spyre.options import SpyreOptions
from pytest_spyre.placement import Placement
from pytest_spyre.policy import apply_policy
from pytest_spyre.record import Agreement, Blocker, TestRecord
from spyre_sim import InferenceOnlyError, SpyreLoweringError, SpyreSimError
from spyre_sim.catalogue import (
    GapState,
    Release,
    builtin_catalogue,
    catalogue_for,
    resolve_stack,
)
from spyre_sim.settings import configure
from spyre_sim.stack import current_stack, use_stack
from spyre_sim.telemetry import diff as telemetry_diff
from spyre_sim.telemetry import snapshot as telemetry_snapshot

__all__ = ["SpyreRun"]

_RECORD_KEY = pytest.StashKey[TestRecord]()
_BEFORE_KEY = pytest.StashKey[dict[str, Any]]()
_PHASES_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
_WORKEROUTPUT = "spyre_records"


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        for inner in getattr(exc, "exceptions", ()):  # exception groups
            yield from _chain(inner)
        exc = exc.__cause__ or exc.__context__


def _find(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    return next((e for e in _chain(exc) if isinstance(e, kind)), None)


def _inference_only_cause(exc: BaseException | None) -> BaseException | None:
    """The error that makes ``exc`` an inference-only stop, or None: an ``InferenceOnlyError``
    (or the guard's skip carrying one), or a lowering error raised under backward or by an op
    only training dispatches."""
    if isinstance(exc, InferenceOnlySkip):
        return exc.error
    found = _find(exc, InferenceOnlyError)
    if found is not None:
        return found
    lowering = _find(exc, SpyreLoweringError)
    if isinstance(lowering, SpyreLoweringError) and (
        in_backward(lowering) or is_training_op(lowering.op)
    ):
        return lowering
    return None


def _pending(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.ExceptionInfo[Any] | None:
    """The exception the report of this phase will be made from: ``call.excinfo``, or for a
    ``unittest.TestCase`` test the first one its result collected (pytest's unittest support
    moves it to ``call.excinfo`` only while the report is made)."""
    if call.excinfo is not None:
        return call.excinfo
    collected = getattr(item, "_excinfo", None)
    if isinstance(collected, list) and collected:
        first = collected[0]
        return first if isinstance(first, pytest.ExceptionInfo) else None
    return None


def _replace_with_skip(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    pending: pytest.ExceptionInfo[Any],
    cause: BaseException,
) -> None:
    """Make pytest report an inference-only stop as a skip from the start: a skip report is
    built without rendering the error's traceback, which through a model's frames costs about
    half a second per test (the report is still adjusted afterwards, as for any skip)."""
    error = cause if isinstance(cause, InferenceOnlyError) else InferenceOnlyError(str(cause))
    try:
        raise InferenceOnlySkip(error) from pending.value
    except InferenceOnlySkip:
        skip = pytest.ExceptionInfo[Any].from_current()
    if call.excinfo is pending:
        call.excinfo = skip
    else:
        collected = getattr(item, "_excinfo", None)
        if isinstance(collected, list) and collected and collected[0] is pending:
            collected[0] = skip


class SpyreRun:
    """State and hooks of one ``--spyre`` run (kept in ``config.stash``)."""

    def __init__(self, config: pytest.Config, options: SpyreOptions) -> None:
        self.config = config
        self.options = options
        self.records: dict[str, TestRecord] = {}
        self._stack = ExitStack()
        self._current: TestRecord | None = None
        self._rebound: list[tuple[ModuleType, Any]] = []
        self.release: Release
        self.registry: AdapterView
        self.resolved: list[str] = []  # "name version" of the adapters resolved for the release
        self.registered = 0
        self.retirable: list[dict[str, Any]] = []
        self.placement: Placement | None = None

    @property
    def builtin(self) -> bool:
        """Whether the release is a built-in one (not a user release file)."""
        return any(r.source == self.release.source for r in builtin_catalogue().releases)

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- set up and tear down -------------------------------------------------------------
    def start(self) -> None:
        opts = self.options
        try:
            self.release = resolve_stack(opts.stack) if opts.stack else current_stack()
        except (SpyreSimError, OSError) as exc:
            raise pytest.UsageError(
                f"--spyre-stack: {opts.stack!r} (from {(opts.sources or {}).get('spyre_stack')}) "
                f"cannot be used: {exc}"
            ) from exc
        # the policy is a view of the release; reports keep naming the release itself
        self._stack.enter_context(use_stack(apply_policy(self.release, opts.unsupported)))
        configure_kwargs: dict[str, Any] = {
            "numerics": opts.numerics,
            "layout_checks": opts.layout_checks,
        }
        self._stack.enter_context(configure(**configure_kwargs))
        self._load_adapters()
        self.placement = Placement(
            prepare=self._prepare,
            restore=_restore,
            on_applied=self._on_applied,
            on_agreement=self._on_agreement if opts.compare else None,
        )
        self.placement.install()
        self._stack.callback(self.placement.uninstall)
        guard = BackwardGuard()
        guard.install()
        self._stack.callback(guard.uninstall)

    def stop(self) -> None:
        self._unbind_host_device()
        self._stack.close()

    def _load_adapters(self) -> None:
        view = AdapterView.load(self.release, self.options.lock)
        self.registry = view
        self.registered = view.registered
        self.resolved = view.resolved
        self.retirable = view.retirable

    def _prepare(self, model: nn.Module) -> list[str]:
        return self.registry.prepare(model)

    def _on_applied(self, model: nn.Module, applied: list[str]) -> None:
        rec = self._current
        if rec is not None:
            for entry in applied:
                if entry not in rec.adapters:
                    rec.adapters.append(entry)

    def _on_agreement(self, value: Agreement) -> None:
        if self._current is not None:
            self._current.compare.append(value)

    # -- reporting ------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lock = str(self.options.lock) if self.options.lock else "none"
        origin = "" if self.builtin else f" from {self.release.source}"
        return [
            f"spyre: stack {self.release.name}{origin}; adapters: {len(self.resolved)} of "
            f"{self.registered} registered apply at this release; lock: {lock}",
            f"spyre: {self.options.describe()}",
        ]

    # -- per test -------------------------------------------------------------------------
    def _xfail_gap(self, item: pytest.Item) -> tuple[str | None, str | None]:
        """The gap of a ``spyre_xfail`` marker, or the problem with the marker."""
        marker = item.get_closest_marker("spyre_xfail")
        if marker is None:
            return None, None
        gap = marker.kwargs.get("gap", marker.args[0] if marker.args else None)
        if not isinstance(gap, str):
            return None, (
                f"spyre_xfail needs a gap id, e.g. spyre_xfail(gap='sin-cos'); got {gap!r}"
            )
        known = catalogue_for(self.release).gaps
        if gap not in known:
            return None, (
                f"spyre_xfail(gap={gap!r}): unknown gap id; known gaps: {', '.join(sorted(known))}"
            )
        return gap, None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        on_host = item.get_closest_marker("no_spyre") is not None
        rec = TestRecord(item.nodeid, on_device=not on_host)
        item.stash[_RECORD_KEY] = rec
        item.stash[_PHASES_KEY] = {}
        item.stash[_BEFORE_KEY] = telemetry_snapshot()
        self._current = rec
        assert self.placement is not None
        self.placement.enabled = not on_host
        if on_host:
            self._bind_host_device(item)
        rec.xfail_gap, problem = self._xfail_gap(item)
        result = yield  # pytest's own setup first: failing before it breaks its teardown
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        return result

    def _bind_host_device(self, item: pytest.Item) -> None:
        """Rebind the Transformers ``torch_device`` global to ``"cpu"`` for a ``no_spyre`` test:
        in ``transformers.testing_utils`` and in every loaded module of the test's rootdir that
        imported it (test modules, testers, conftests)."""
        root = str(item.config.rootpath)
        for name, module in list(sys.modules.items()):
            if module is None:
                continue
            is_tu = name == "transformers.testing_utils"
            path = getattr(module, "__file__", None) or ""
            if not is_tu and not path.startswith(root):
                continue
            if getattr(module, "torch_device", None) == "spyre":
                self._rebound.append((module, "spyre"))
                setattr(module, "torch_device", "cpu")  # noqa: B010 (module attribute)

    def _unbind_host_device(self) -> None:
        for module, value in reversed(self._rebound):
            setattr(module, "torch_device", value)  # noqa: B010
        self._rebound.clear()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rec = item.stash.get(_RECORD_KEY, None)
        if rec is None:  # not set up by us (collection-time report)
            return (yield)
        pending = _pending(item, call)
        early = _find(pending.value if pending is not None else None, SpyreLoweringError)
        if isinstance(early, SpyreLoweringError):
            self._add_hints(early)  # before the report renders the exception
        if call.when != "teardown" and pending is not None:
            cause = _inference_only_cause(pending.value)
            if cause is not None:
                _replace_with_skip(item, call, pending, cause)
        if call.when == "teardown":
            self._finish_telemetry(item, rec)
            item.user_properties.extend(rec.properties())
        report: pytest.TestReport = yield
        # read the exception only now: pytest's unittest support sets ``call.excinfo`` of a
        # TestCase test in its own makereport implementation, which runs inside this wrapper
        exc = call.excinfo.value if call.excinfo is not None else None
        lowering = _find(exc, SpyreLoweringError)
        inference_only = _inference_only_cause(exc)
        if isinstance(lowering, SpyreLoweringError) and inference_only is None:
            blocker = self._blocker(lowering)
            if rec.blocked_by is None:
                rec.blocked_by = blocker
            report.sections.append(("spyre", self._blocker_text(blocker)))
        if call.when != "teardown" and inference_only is not None:
            rec.inference_only = True
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, skip_reason(inference_only))
        elif rec.xfail_gap is not None and call.when in ("setup", "call"):
            self._apply_xfail_gap(item, call, report, rec)
        phases = item.stash[_PHASES_KEY]
        phases[call.when] = report
        if call.when == "teardown":
            rec.outcome = _outcome(phases)
            self.records[rec.nodeid] = rec
            self._current = None
            if self.placement is not None:
                self.placement.enabled = True
            self._unbind_host_device()
        return report

    def _apply_xfail_gap(
        self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
        rec: TestRecord,
    ) -> None:  # fmt: skip
        """``spyre_xfail(gap=G)`` at release R.

        - G closed at R: the call phase fails with "gap closed: remove this marker", whatever
          the test did (a setup failure stays a setup error);
        - G open at R and the test failed *having hit G* (a lowering error naming G, or
          telemetry shows G hit or miscompiled): xfailed;
        - G open and the test failed without hitting G: stays failed, with a note;
        - G open and the test passed: XPASS, strict per ``strict=`` or ini ``xfail_strict``.
        """
        gap = rec.xfail_gap
        assert gap is not None
        state = self.release.gap_state(gap)
        if state is GapState.CLOSED:
            if call.when == "call":
                rec.gap_closed = True
                first = _first_closing(catalogue_for(self.release), gap, self.release)
                message = (
                    f"gap closed: remove this marker: spyre_xfail(gap={gap!r}) but gap `{gap}` "
                    f"is closed at stack {self.release.name}"
                    + (f" (first closed in {first})" if first else "")
                    + f"; the test {'passed' if report.passed else 'failed'} at this release"
                )
                report.outcome = "failed"
                report.longrepr = message if report.passed else f"{message}\n\n{report.longrepr}"
            return
        reason = f"spyre: gap `{gap}` is {state.value} at stack {self.release.name}"
        if report.failed:
            hit = self._hit_so_far(item, rec)
            if gap in hit:
                report.outcome = "skipped"
                report.wasxfail = reason
            else:
                report.sections.append((
                    "spyre",
                    f"spyre_xfail(gap={gap!r}) expected a failure caused by gap `{gap}`, but "
                    f"the test failed without hitting it (gaps hit: "
                    f"{', '.join(sorted(hit)) or 'none'}): it fails for another reason",
                ))  # fmt: skip
        elif call.when == "call" and report.passed:
            marker = item.get_closest_marker("spyre_xfail")
            strict = marker.kwargs.get("strict") if marker is not None else None
            if strict is None:
                strict = bool(item.config.getini("xfail_strict"))
            if strict:
                report.outcome = "failed"
                report.longrepr = (
                    f"[XPASS(strict)] {reason}, but the test passed: an adapter or a fallback "
                    f"may bridge the gap here; drop the marker or make it strict=False"
                )
            else:
                report.wasxfail = reason

    def _hit_so_far(self, item: pytest.Item, rec: TestRecord) -> set[str]:
        delta = telemetry_diff(telemetry_snapshot(), item.stash[_BEFORE_KEY])
        hit = set(delta.get("gaps", {})) | set(delta.get("miscompiles", {}))
        hit |= set(delta.get("errors", {}))
        if rec.blocked_by is not None:
            hit.add(rec.blocked_by.gap)
        return hit

    def _finish_telemetry(self, item: pytest.Item, rec: TestRecord) -> None:
        delta = telemetry_diff(telemetry_snapshot(), item.stash[_BEFORE_KEY])
        for gap, entry in delta.get("gaps", {}).items():
            if entry.get("count", 0):
                rec.gaps[gap] = rec.gaps.get(gap, 0) + int(entry["count"])
                rec.gap_modules.setdefault(gap, [])
                for path in entry.get("modules", []):
                    if path not in rec.gap_modules[gap]:
                        rec.gap_modules[gap].append(path)
        for gap, count in delta.get("errors", {}).items():
            if count:
                rec.gaps.setdefault(gap, 0)
                rec.gaps[gap] += 0 if gap in delta.get("gaps", {}) else int(count)
        for op, count in delta.get("fallbacks", {}).items():
            if count:
                rec.fallbacks[op] = int(count)
        for gap, entry in delta.get("miscompiles", {}).items():
            if entry.get("count", 0):
                rec.miscompiles[gap] = int(entry["count"])
        if rec.blocked_by is not None:
            rec.gaps.setdefault(rec.blocked_by.gap, 1)

    def _add_hints(self, error: SpyreLoweringError) -> None:
        for name in self.registry.bridging(error.gap):
            error.add_hint(f"adapter `{name}` bridges gap `{error.gap}`")

    def _blocker(self, error: SpyreLoweringError) -> Blocker:
        bridged = self.registry.bridging(error.gap)
        return Blocker(
            gap=error.gap, op=error.op, release=error.release, module_path=error.module_path,
            closes_in=error.closes_in, lasting=error.lasting, message=str(error).split("\n")[0],
            bridged_by=bridged,
        )  # fmt: skip

    def _blocker_text(self, blocker: Blocker) -> str:
        lines = [
            f"blocked by gap `{blocker.gap}` at stack {blocker.release}",
            f"  op:          {blocker.op}",
            f"  module path: {blocker.module_path or '(not inside a module forward)'}",
            "  closes in:   "
            + (blocker.closes_in or ("never (lasting hardware property)" if blocker.lasting
                                     else "no known release")),
            "  bridged by:  "
            + (", ".join(blocker.bridged_by) if blocker.bridged_by else "no registered adapter"),
        ]  # fmt: skip
        if blocker.bridged_by and not any(a in self.resolved for a in blocker.bridged_by):
            lines.append(
                "  note: the bridging adapter is registered but not resolved for this release "
                "(see `spyre-adapters audit --stack " + blocker.release + "`)"
            )
        return "\n".join(lines)

    # -- end of run -----------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            payload = [r.to_json() for r in self.records.values()]
            self.config.workeroutput[_WORKEROUTPUT] = json.dumps(payload)  # type: ignore[attr-defined]
            return
        if self.options.report is not None:
            data = report_mod.build(self, list(self.records.values()))
            report_mod.write(self.options.report, data)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        payload = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT)
        if payload:
            for data in json.loads(payload):
                rec = TestRecord.from_json(data)
                self.records[rec.nodeid] = rec

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or self.config.option.collectonly:
            return
        summary_mod.write(terminalreporter, self, list(self.records.values()))


def _restore(model: nn.Module) -> None:
    import spyre_adapters

    spyre_adapters.restore(model)


def _first_closing(catalogue: Any, gap: str, release: Release) -> str | None:
    """The earliest release in the catalogue, up to ``release``, from which the gap stays
    closed (for the "gap closed" message)."""
    first: str | None = None
    for name, state in catalogue.timeline(gap):
        first = (first or name) if state is GapState.CLOSED else None
        if name == release.name:
            break
    return first or release.name


def _outcome(phases: dict[str, pytest.TestReport]) -> str:
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if setup is not None and setup.failed:
        return "error"
    for report in (setup, call):
        if report is not None and report.skipped:
            return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if call is not None and call.failed:
        return "failed"
    if teardown is not None and teardown.failed:
        return "error"
    if call is not None and hasattr(call, "wasxfail"):
        return "xpassed"
    return "passed"
