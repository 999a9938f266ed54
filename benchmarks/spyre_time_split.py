"""A pytest plugin for ``bench_conformance.py --breakdown``: where a run's test time goes.

Loaded with ``-p spyre_time_split`` (the benchmark puts this folder on ``PYTHONPATH``), it adds
up, in the pytest process (each xdist worker for itself), the wall time of

- ``tests``: every test's call phase (setup and teardown excluded);
- ``model_calls``: outermost ``nn.Module`` calls (a model's forward, a generation step's),
  without any ``spyre_adapters.prepare`` they trigger;
- ``prepare``: every ``spyre_adapters.prepare`` (on the CPU there is none),

and writes them as JSON to ``$SPYRE_TIME_SPLIT.<worker>`` when the run ends. The rest of
``tests`` is the test's own work: building models and inputs, comparing, saving, loading.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

_TOTALS = {"tests": 0.0, "model_calls": 0.0, "prepare": 0.0, "prepares": 0, "calls": 0}
_STATE = {"depth": 0, "prepare_in_call": 0.0}


def _wrap_prepare() -> None:
    import spyre_adapters
    import spyre_adapters.preparation as preparation

    stock = preparation.prepare

    def prepare(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return stock(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            _TOTALS["prepare"] += spent
            _TOTALS["prepares"] += 1
            if _STATE["depth"]:
                _STATE["prepare_in_call"] += spent

    preparation.prepare = prepare  # type: ignore[assignment]
    spyre_adapters.prepare = prepare  # type: ignore[attr-defined]


def _wrap_calls() -> None:
    from torch import nn

    stock = nn.Module.__call__

    def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if _STATE["depth"]:
            return stock(module, *args, **kwargs)
        _STATE["depth"] = 1
        _STATE["prepare_in_call"] = 0.0
        start = time.perf_counter()
        try:
            return stock(module, *args, **kwargs)
        finally:
            _STATE["depth"] = 0
            _TOTALS["model_calls"] += time.perf_counter() - start - _STATE["prepare_in_call"]
            _TOTALS["calls"] += 1

    nn.Module.__call__ = call  # type: ignore[method-assign]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _wrap_prepare()
    _wrap_calls()  # after pytest_spyre's placement: outside it, so its prepares are seen


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    start = time.perf_counter()
    yield
    _TOTALS["tests"] += time.perf_counter() - start


def pytest_unconfigure(config: pytest.Config) -> None:
    target = os.environ.get("SPYRE_TIME_SPLIT")
    if target:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{target}.{worker}", "w", encoding="utf-8") as handle:
            json.dump(_TOTALS, handle)
