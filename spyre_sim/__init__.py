"""An emulated IBM Spyre device for PyTorch whose behaviour follows a chosen stack release."""

from __future__ import annotations

from spyre_sim.errors import (
    CatalogueError,
    InferenceOnlyError,
    SpyreLayoutError,
    SpyreLoweringError,
    SpyreSimError,
)

__all__ = [
    "CatalogueError",
    "InferenceOnlyError",
    "SpyreLayoutError",
    "SpyreLoweringError",
    "SpyreSimError",
]
