"""The run-wide outputs of a ``--spyre`` run: header line, terminal summary, JSON report.

Controller-side only (an xdist worker's records reach the controller through
:mod:`pytest_spyre.distributed`). The terminal summary is written before the JSON report, and
a report that cannot be written (its directory vanished, the disk is full) is an error line in
the summary and a non-zero exit (3, internal error), never a lost summary.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_spyre import report as report_mod
from pytest_spyre import summary as summary_mod
from pytest_spyre.distributed import is_worker
from pytest_spyre.record import TestRecord
from pytest_spyre.session import DeviceSession

__all__ = ["Reporting"]


class Reporting:
    """Header, summary and JSON report (see the module docstring)."""

    def __init__(self, session: DeviceSession, records: dict[str, TestRecord]) -> None:
        self.session = session
        self.records = records
        self.report_error: str | None = None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        session, view = self.session, self.session.adapters
        lock = str(session.options.lock) if session.options.lock else "none"
        origin = "" if session.builtin else f" from {session.release.source}"
        return [
            f"spyre: stack {session.release.name}{origin}; adapters: {len(view.resolved)} of "
            f"{view.registered} registered apply at this release; lock: {lock}",
            f"spyre: {session.options.describe()}",
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        path = self.session.options.report
        if path is None or is_worker(self.session.config):
            return
        records = list(self.records.values())
        try:
            report_mod.write(path, report_mod.build(self.session, records))
        except OSError as exc:
            self.report_error = f"{path}: {exc.strerror or exc}"
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        config = self.session.config
        if is_worker(config) or config.option.collectonly:
            return
        summary_mod.write(terminalreporter, self.session, list(self.records.values()))
        path = self.session.options.report
        if self.report_error is not None:
            terminalreporter.write_line(
                f"JSON report NOT written: {self.report_error}; the summary above is complete",
                red=True,
            )
        elif path is not None:
            terminalreporter.write_line(f"JSON report: {path}")
