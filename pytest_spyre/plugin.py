"""The pytest plugin (``pytest11`` entry point ``spyre``). Inert unless ``--spyre`` is given.

Without ``--spyre`` (or ``SPYRE=1`` / ini ``spyre = true``) this module registers the option
group, the ini keys and the markers, and does nothing else: it imports neither torch nor
Transformers, patches nothing and prints nothing. Everything that acts on the device is
imported only when the device is on, and registered as plugin objects, one per feature:

- :class:`~pytest_spyre.session.DeviceSession` (not a plugin: the device side of the run --
  release, switches, adapters, placement, backward guard, closeness checks, hints);
- :class:`~pytest_spyre.recorder.TestRecorder`: per-test records and failure classes;
- :class:`~pytest_spyre.xfail_gap.XfailGapPlugin`: the ``spyre_xfail`` marker;
- :class:`~pytest_spyre.expectations.ExpectationsPlugin`: ``--spyre-expectations FILE``;
- :class:`~pytest_spyre.host_tests.HostTests`: ``no_spyre`` tests on the host;
- :class:`~pytest_spyre.distributed.WorkerRecords`: records from xdist workers;
- :class:`~pytest_spyre.reporting.Reporting`: header, terminal summary, JSON report;
- :class:`~pytest_spyre.capture_bridges.BridgeCapture`: ``--spyre-capture-bridges DIR``.

Order of events with ``--spyre``:

1. ``pytest_load_initial_conftests`` (``tryfirst``, before any conftest is imported): options
   are validated, ``spyre_sim`` is imported (which registers the ``spyre`` device), the
   Transformers test-device contract is set up and the run's settings are exported for child
   processes (:mod:`pytest_spyre.transformers_contract`), so a suite's root conftest that
   imports ``transformers.testing_utils`` gets ``torch_device == "spyre"``.
2. ``pytest_configure``: the device session starts and the feature plugins are registered.
3. per test: the feature plugins' hooks; at the end the summary and the JSON report.
4. ``pytest_unconfigure``: all of it undone (plugins, environment, settings, stack, hooks).

``no_spyre`` decision: such a test runs on the host. ``spyre_device`` is ``cpu``; the
Transformers ``torch_device`` global is rebound to ``"cpu"`` for the duration of the test;
models moved during the test get no adapters.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from pytest_spyre.options import SpyreOptions, add_options, resolve_options

if TYPE_CHECKING:
    from pytest_spyre.session import DeviceSession
    from pytest_spyre.transformers_contract import ContractState

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_unconfigure",
    "spyre_device",
    "spyre_stack",
]

OPTIONS_KEY = pytest.StashKey[SpyreOptions]()
CONTRACT_KEY: pytest.StashKey[ContractState] = pytest.StashKey()
SESSION_KEY: pytest.StashKey[DeviceSession] = pytest.StashKey()
PLUGINS_KEY: pytest.StashKey[list[object]] = pytest.StashKey()

MARKERS = (
    "spyre_xfail(gap, strict=None): under --spyre, expected to fail while stack gap `gap` is "
    "open at the chosen release; at a release where the gap is closed the test fails with "
    "'gap closed: remove this marker'. Inert without --spyre.",
    "no_spyre: under --spyre, keep this test on the host: spyre_device is cpu, the "
    "Transformers torch_device is rebound to 'cpu' for the test, no adapters are applied.",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def _options(config: pytest.Config, namespace: Any) -> SpyreOptions:
    return resolve_options(namespace, os.environ, lambda key: str(config.getini(key)))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    # ``known_args_namespace`` already holds ``args`` (addopts included) parsed with our options.
    options = _options(early_config, early_config.known_args_namespace)
    early_config.stash[OPTIONS_KEY] = options
    if not options.enabled:
        return
    from pytest_spyre.transformers_contract import enter_contract

    early_config.stash[CONTRACT_KEY] = enter_contract(options)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    options = config.stash.get(OPTIONS_KEY, None)
    if options is None:  # registered after the initial conftests (e.g. ``-p`` in a conftest)
        options = _options(config, config.option)
        config.stash[OPTIONS_KEY] = options
    if not options.enabled:
        return
    if CONTRACT_KEY not in config.stash:
        from pytest_spyre.transformers_contract import enter_contract

        config.stash[CONTRACT_KEY] = enter_contract(options)
    from pytest_spyre.session import DeviceSession

    session = DeviceSession(config, options)
    config.stash[SESSION_KEY] = session  # before start(): unconfigure undoes a partial start
    config.stash[PLUGINS_KEY] = []
    session.start()
    for plugin in _feature_plugins(config, session):
        config.pluginmanager.register(plugin, f"spyre-{type(plugin).__name__}")
        config.stash[PLUGINS_KEY].append(plugin)


def _feature_plugins(config: pytest.Config, session: DeviceSession) -> list[object]:
    from pytest_spyre.distributed import WorkerRecords
    from pytest_spyre.expectations import ExpectationsPlugin
    from pytest_spyre.host_tests import HostTests
    from pytest_spyre.recorder import TestRecorder
    from pytest_spyre.reporting import Reporting
    from pytest_spyre.xfail_gap import XfailGapPlugin

    recorder = TestRecorder(session)
    plugins: list[object] = [
        recorder,
        XfailGapPlugin(session.release),
        HostTests(),
        WorkerRecords(config, recorder.records),
        Reporting(session, recorder.records),
    ]
    if session.options.expectations is not None:
        plugins.append(ExpectationsPlugin.load(session, recorder.records))
    if session.options.capture_bridges is not None:
        from pytest_spyre.capture_bridges import BridgeCapture

        plugins.append(BridgeCapture(session, session.options.capture_bridges))
    return plugins


def pytest_unconfigure(config: pytest.Config) -> None:
    plugins: list[object] = config.stash.get(PLUGINS_KEY, [])
    for plugin in reversed(plugins):
        if config.pluginmanager.is_registered(plugin):
            config.pluginmanager.unregister(plugin)
        restore = getattr(plugin, "restore", None)
        if callable(restore):
            restore()
    config.stash[PLUGINS_KEY] = []
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        del config.stash[SESSION_KEY]
        session.stop()
    contract = config.stash.get(CONTRACT_KEY, None)
    if contract is not None:
        del config.stash[CONTRACT_KEY]
        contract.leave()


def _on_host(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("no_spyre") is not None


@pytest.fixture
def spyre_device(request: pytest.FixtureRequest) -> Any:
    """The device to put models and inputs on: ``torch.device("spyre")`` under ``--spyre``,
    ``torch.device("cpu")`` without it or for a ``no_spyre`` test."""
    import torch

    session = request.config.stash.get(SESSION_KEY, None)
    return torch.device("cpu" if session is None or _on_host(request) else "spyre")


@pytest.fixture
def spyre_stack(request: pytest.FixtureRequest) -> Any:
    """The active stack release (a ``spyre_sim`` ``Release``); skips the test without
    ``--spyre``."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("spyre_stack needs --spyre (the emulated device is off)")
    return session.release
