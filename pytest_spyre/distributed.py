"""Records across ``pytest-xdist`` workers: each worker sends its records to the controller.

A worker's :class:`WorkerRecords` puts the records it made into ``workeroutput`` when its
session finishes; the controller's merges them as each worker goes down, so its summary and
JSON report equal those of a serial run (records are plain data: see
:class:`~pytest_spyre.record.TestRecord`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_spyre.record import TestRecord

__all__ = ["WORKEROUTPUT_KEY", "WorkerRecords", "is_worker"]

WORKEROUTPUT_KEY = "spyre_records"


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker."""
    return hasattr(config, "workerinput")


class WorkerRecords:
    """Moves records from workers to the controller (see the module docstring)."""

    def __init__(self, config: pytest.Config, records: dict[str, TestRecord]) -> None:
        self.config = config
        self.records = records

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if is_worker(self.config):
            payload = [r.to_json() for r in self.records.values()]
            self.config.workeroutput[WORKEROUTPUT_KEY] = json.dumps(payload)  # type: ignore[attr-defined]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        payload = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if payload:
            for data in json.loads(payload):
                record = TestRecord.from_json(data)
                self.records[record.nodeid] = record
