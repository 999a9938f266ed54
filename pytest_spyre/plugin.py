"""The pytest plugin (``pytest11`` entry point ``spyre``). Inert unless ``--spyre`` is given.

Without ``--spyre`` (or ``SPYRE=1`` / ini ``spyre = true``) this module registers the option
group, the ini keys and the markers, and does nothing else: it imports neither torch nor
Transformers, patches nothing and prints nothing. Everything that acts on the device lives in
:mod:`pytest_spyre.run` (imported only when the device is on), which registers itself as a
second plugin object for the per-test hooks.

Order of events with ``--spyre``:

1. ``pytest_load_initial_conftests`` (``tryfirst``, before any conftest is imported): options
   are validated, ``spyre_sim`` is imported (which registers the ``spyre`` device) and the
   Transformers test-device contract is set up (:mod:`pytest_spyre.transformers_contract`), so
   a suite's root conftest that imports ``transformers.testing_utils`` gets
   ``torch_device == "spyre"``.
2. ``pytest_configure``: the stack release is selected (seen through the unsupported-op
   policy, :mod:`pytest_spyre.policy`), settings applied, adapters resolved,
   ``nn.Module.to``/``cpu`` hooked (:mod:`pytest_spyre.placement`), backward on device tensors
   refused early (:mod:`pytest_spyre.inference_only`).
3. per test: records, failure sections, markers (:mod:`pytest_spyre.run`); at the end the
   terminal summary (:mod:`pytest_spyre.summary`) and JSON report (:mod:`pytest_spyre.report`).
4. ``pytest_unconfigure``: all of it undone (environment, settings, stack, hooks).

``no_spyre`` decision: such a test runs on the host. ``spyre_device`` is ``cpu``; the
Transformers ``torch_device`` global (a module constant fixed at import) is rebound to
``"cpu"`` in ``transformers.testing_utils`` and in the suite's loaded modules for the duration
of the test and put back afterwards; models moved during the test get no adapters.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from pytest_spyre.options import SpyreOptions, add_options, resolve_options

if TYPE_CHECKING:
    from pytest_spyre.run import SpyreRun
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
RUN_KEY: pytest.StashKey[SpyreRun] = pytest.StashKey()

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

    early_config.stash[CONTRACT_KEY] = enter_contract()


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

        config.stash[CONTRACT_KEY] = enter_contract()
    from pytest_spyre.run import SpyreRun

    run = SpyreRun(config, options)
    config.stash[RUN_KEY] = run  # before start(): unconfigure undoes a partial start
    run.start()
    config.pluginmanager.register(run, "spyre-run")


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        del config.stash[RUN_KEY]
        if config.pluginmanager.is_registered(run):
            config.pluginmanager.unregister(run)
        run.stop()
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

    run = request.config.stash.get(RUN_KEY, None)
    return torch.device("cpu" if run is None or _on_host(request) else "spyre")


@pytest.fixture
def spyre_stack(request: pytest.FixtureRequest) -> Any:
    """The active stack release (a ``spyre_sim`` ``Release``); skips the test without
    ``--spyre``."""
    run = request.config.stash.get(RUN_KEY, None)
    if run is None:
        pytest.skip("spyre_stack needs --spyre (the emulated device is off)")
    return run.release
