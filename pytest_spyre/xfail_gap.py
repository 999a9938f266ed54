"""The ``spyre_xfail(gap=G, strict=None)`` marker: expected to fail while gap G is open.

Like pytest's own ``skipping`` plugin, the marker is evaluated once, at setup, into a frozen
:class:`XfailGap` kept in ``item.stash``; the report hook only reads it. At release R:

- G closed at R: the call phase fails with "gap closed: remove this marker", whatever the test
  did (a setup failure stays a setup error);
- G open at R and the test failed *having hit G* (a lowering error naming G, or telemetry shows
  G hit or miscompiled): xfailed;
- G open and the test failed without hitting G: stays failed, with a note;
- G open and the test passed: XPASS, strict per ``strict=`` or ini ``xfail_strict``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import pytest

from pytest_spyre.recorder import RECORD_KEY
from spyre_sim.catalogue import GapState, Release, catalogue_for

__all__ = ["XfailGap", "XfailGapPlugin"]


@dataclass(frozen=True)
class XfailGap:
    """A test's evaluated ``spyre_xfail`` marker: the gap, its state at the release, and the
    strictness; or the problem with the marker."""

    gap: str | None
    state: GapState | None
    strict: bool
    problem: str | None = None


_KEY = pytest.StashKey[XfailGap]()


def evaluate(item: pytest.Item, release: Release) -> XfailGap | None:
    """The marker of ``item`` at ``release``, evaluated (None without a marker)."""
    marker = item.get_closest_marker("spyre_xfail")
    if marker is None:
        return None
    gap = marker.kwargs.get("gap", marker.args[0] if marker.args else None)
    strict = marker.kwargs.get("strict")
    if strict is None:
        strict = bool(item.config.getini("xfail_strict"))
    if not isinstance(gap, str):
        return XfailGap(None, None, bool(strict),
                        f"spyre_xfail needs a gap id, e.g. spyre_xfail(gap='sin-cos'); got {gap!r}")  # fmt: skip
    known = catalogue_for(release).gaps
    if gap not in known:
        return XfailGap(gap, None, bool(strict),
                        f"spyre_xfail(gap={gap!r}): unknown gap id; known gaps: "
                        f"{', '.join(sorted(known))}")  # fmt: skip
    return XfailGap(gap, release.gap_state(gap), bool(strict))


def _first_closed(release: Release, gap: str) -> str:
    """The earliest release, up to ``release``, from which the gap stays closed."""
    first: str | None = None
    for name, state in catalogue_for(release).timeline(gap):
        first = (first or name) if state is GapState.CLOSED else None
        if name == release.name:
            break
    return first or release.name


class XfailGapPlugin:
    """Evaluates the marker at setup and turns reports into xfail/XPASS/closed-gap failures."""

    def __init__(self, release: Release) -> None:
        self.release = release

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        found = evaluate(item, self.release)
        if found is None:
            return
        item.stash[_KEY] = found
        record = item.stash.get(RECORD_KEY, None)
        if record is not None:
            record.xfail_gap = found.gap
        if found.problem is not None:
            pytest.fail(found.problem, pytrace=False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report: pytest.TestReport = yield
        found = item.stash.get(_KEY, None)
        if found is None or found.problem is not None or call.when not in ("setup", "call"):
            return report
        assert found.gap is not None
        gap, release = found.gap, self.release
        record = item.stash.get(RECORD_KEY, None)
        if found.state is GapState.CLOSED:
            if call.when == "call":
                if record is not None:
                    record.gap_closed = True
                message = (
                    f"gap closed: remove this marker: spyre_xfail(gap={gap!r}) but gap `{gap}` "
                    f"is closed at stack {release.name} (first closed in "
                    f"{_first_closed(release, gap)}); the test "
                    f"{'passed' if report.passed else 'failed'} at this release"
                )
                report.outcome = "failed"
                report.longrepr = message if report.passed else f"{message}\n\n{report.longrepr}"
            return report
        assert found.state is not None
        reason = f"spyre: gap `{gap}` is {found.state.value} at stack {release.name}"
        if report.failed:
            hit: set[str] = set()
            if record is not None:
                hit = set(record.gaps) | set(record.miscompiles)
                if record.blocked_by is not None:
                    hit.add(record.blocked_by.gap)
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
            if found.strict:
                report.outcome = "failed"
                report.longrepr = (
                    f"[XPASS(strict)] {reason}, but the test passed: an adapter or a fallback "
                    f"may bridge the gap here; drop the marker or make it strict=False"
                )
            else:
                report.wasxfail = reason
        return report
