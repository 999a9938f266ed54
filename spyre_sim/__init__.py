"""An emulated IBM Spyre device for PyTorch whose behaviour follows a chosen stack release.

``import spyre_sim`` registers the ``spyre`` device (explicit import = registration).
"""

from __future__ import annotations

from spyre_sim import telemetry
from spyre_sim._tensor import SpyreTensor
from spyre_sim.catalogue import (
    Catalogue,
    Decision,
    Gap,
    GapNature,
    GapState,
    OpRule,
    Release,
    builtin_catalogue,
    load_release_file,
    resolve_stack,
)
from spyre_sim.device import register
from spyre_sim.errors import (
    CatalogueError,
    InferenceOnlyError,
    SpyreDowncastWarning,
    SpyreFallbackWarning,
    SpyreLayoutError,
    SpyreLoweringError,
    SpyreSimError,
    SpyreSimWarning,
)
from spyre_sim.numerics import round_to_dl16
from spyre_sim.settings import Settings, configure, settings
from spyre_sim.stack import current_stack, stack_generation, use_stack

__all__ = [
    "Catalogue",
    "CatalogueError",
    "Decision",
    "Gap",
    "GapNature",
    "GapState",
    "InferenceOnlyError",
    "OpRule",
    "Release",
    "Settings",
    "SpyreDowncastWarning",
    "SpyreFallbackWarning",
    "SpyreLayoutError",
    "SpyreLoweringError",
    "SpyreSimError",
    "SpyreSimWarning",
    "SpyreTensor",
    "builtin_catalogue",
    "configure",
    "current_stack",
    "load_release_file",
    "register",
    "resolve_stack",
    "round_to_dl16",
    "settings",
    "stack_generation",
    "telemetry",
    "use_stack",
]

register()
