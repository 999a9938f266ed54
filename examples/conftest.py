"""Root conftest of the example suite, in the style of Transformers' own ``tests/conftest.py``.

Importing ``transformers.testing_utils`` here fixes ``torch_device`` for the whole run, while
pytest is still loading the initial conftests: a device plugin has to be in place before this
line runs (``pytest --spyre`` does it in ``pytest_load_initial_conftests``).
"""

from __future__ import annotations

from transformers.testing_utils import torch_device


def pytest_report_header() -> str:
    return f"example suite: torch_device={torch_device}"
