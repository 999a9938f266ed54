"""``pytest --spyre``: run an existing model test suite on the emulated Spyre device.

The plugin module is :mod:`pytest_spyre.plugin` (entry point ``pytest11``/``spyre``). This
package stays importable without torch; the parts that need the device load only under
``--spyre``.
"""

from __future__ import annotations

from pytest_spyre.options import OPTION_SPECS, SpyreOptions
from pytest_spyre.record import Agreement, Blocker, TestRecord
from pytest_spyre.report import SCHEMA_VERSION

__all__ = ["OPTION_SPECS", "SCHEMA_VERSION", "Agreement", "Blocker", "SpyreOptions", "TestRecord"]
