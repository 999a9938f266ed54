"""An emulated IBM Spyre device for PyTorch whose behaviour follows a chosen stack release.

``import spyre_sim`` registers the ``spyre`` device (explicit import = registration)::

    import torch, spyre_sim

    model.to("spyre")                              # fp32 weights are stored as fp16 (DL16)
    with spyre_sim.use_stack("2026.05"), torch.no_grad():
        logits = model(input_ids.to("spyre")).logits.cpu()
    spyre_sim.telemetry.snapshot()                 # ops, fallbacks, gaps by module path...

Ops the release cannot lower raise :class:`SpyreLoweringError` (layout rules:
:class:`SpyreLayoutError`) naming the op, shapes, gap, first closing release and module path;
cpu-fallbacks warn once with :class:`SpyreFallbackWarning`; documented miscompiles are
reproduced (:mod:`spyre_sim.miscompile`). ``configure(numerics=False)`` turns DL16 emulation
off, ``configure(layout_checks=False)`` the layout rules (:mod:`spyre_sim.layout`).
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
    StackResolution,
    builtin_catalogue,
    load_release_file,
    resolve_stack,
    resolve_upstream,
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
    SpyreStackResolutionWarning,
)
from spyre_sim.numerics import round_to_dl16
from spyre_sim.scope import in_model_scope, model_scope
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
    "StackResolution",
    "SpyreDowncastWarning",
    "SpyreFallbackWarning",
    "SpyreLayoutError",
    "SpyreLoweringError",
    "SpyreSimError",
    "SpyreSimWarning",
    "SpyreStackResolutionWarning",
    "SpyreTensor",
    "builtin_catalogue",
    "configure",
    "current_stack",
    "in_model_scope",
    "load_release_file",
    "model_scope",
    "register",
    "resolve_stack",
    "resolve_upstream",
    "round_to_dl16",
    "settings",
    "stack_generation",
    "telemetry",
    "use_stack",
]

register()
