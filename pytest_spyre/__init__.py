"""``pytest --spyre``: run an existing model test suite on the emulated Spyre device."""

from __future__ import annotations

__all__: list[str] = []
