"""Versioned adapters that bridge a Spyre stack release's gaps, and their lifecycle."""

from __future__ import annotations

__all__: list[str] = []
