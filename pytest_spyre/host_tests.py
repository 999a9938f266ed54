"""``no_spyre`` tests run on the host, in a suite whose device was chosen at import time.

Transformers picks ``torch_device`` once, as a module constant of ``transformers.testing_utils``
that test modules import by name. For a ``no_spyre`` test, :class:`HostTests` rebinds that
name to ``"cpu"`` in ``transformers.testing_utils`` and in every loaded module under the
rootdir that imported it (test modules, testers, conftests), for the duration of the test, and
puts it back afterwards. (``spyre_device`` is ``cpu`` for such a test, and the recorder keeps
adapters off its models.)
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from types import ModuleType
from typing import Any

import pytest

from pytest_spyre.transformers_contract import DEVICE

__all__ = ["HostTests"]


class HostTests:
    """Rebinds Transformers' ``torch_device`` for ``no_spyre`` tests (see the module)."""

    def __init__(self) -> None:
        self._rebound: list[tuple[ModuleType, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.get_closest_marker("no_spyre") is None:
            return
        root = str(item.config.rootpath)
        for name, module in list(sys.modules.items()):
            if module is None:
                continue
            path = getattr(module, "__file__", None) or ""
            if name != "transformers.testing_utils" and not path.startswith(root):
                continue
            if getattr(module, "torch_device", None) == DEVICE:
                self._rebound.append((module, DEVICE))
                setattr(module, "torch_device", "cpu")  # noqa: B010 (module attribute)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            self.restore()

    def restore(self) -> None:
        for module, value in reversed(self._rebound):
            setattr(module, "torch_device", value)  # noqa: B010
        self._rebound.clear()
