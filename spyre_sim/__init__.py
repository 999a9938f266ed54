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

Importing this package does not import torch: the stack catalogue, settings, the active stack
and telemetry are plain Python, so tools that only read the catalogue stay fast. The names that
need torch (:class:`SpyreTensor`, :func:`register`, :func:`round_to_dl16`, :func:`round_wide_to_dl16`, the model scope) are
imported on first use, and the device is registered as soon as torch is imported (at once when
it already is; see :mod:`spyre_sim._torch_hook`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from spyre_sim import limits, telemetry
from spyre_sim._torch_hook import register_when_torch_imports
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
from spyre_sim.errors import (
    CatalogueError,
    InferenceOnlyError,
    SpyreDeviceIndexError,
    SpyreDowncastWarning,
    SpyreFallbackWarning,
    SpyreLayoutError,
    SpyreLoweringError,
    SpyreSimError,
    SpyreSimWarning,
    SpyreStackResolutionWarning,
    UnknownReleaseError,
)
from spyre_sim.settings import Settings, configure, settings
from spyre_sim.stack import current_stack, stack_generation, use_stack

if TYPE_CHECKING:
    from spyre_sim._tensor import SpyreTensor
    from spyre_sim.device import register
    from spyre_sim.numerics import round_to_dl16, round_wide_to_dl16
    from spyre_sim.scope import in_model_scope, model_scope

__all__ = [
    "Catalogue",
    "CatalogueError",
    "Decision",
    "Gap",
    "GapNature",
    "GapState",
    "InferenceOnlyError",
    "SpyreDeviceIndexError",
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
    "UnknownReleaseError",
    "builtin_catalogue",
    "configure",
    "current_stack",
    "in_model_scope",
    "limits",
    "load_release_file",
    "model_scope",
    "register",
    "resolve_stack",
    "resolve_upstream",
    "round_to_dl16",
    "round_wide_to_dl16",
    "settings",
    "stack_generation",
    "telemetry",
    "use_stack",
]


#: Public names that need torch, and the module each comes from (imported on first use).
_NEEDS_TORCH = {
    "SpyreTensor": "spyre_sim._tensor",
    "register": "spyre_sim.device",
    "round_to_dl16": "spyre_sim.numerics",
    "round_wide_to_dl16": "spyre_sim.numerics",
    "in_model_scope": "spyre_sim.scope",
    "model_scope": "spyre_sim.scope",
}


def __getattr__(name: str) -> Any:
    """The names that need torch, and the submodules not imported yet (``spyre_sim.layout``)."""
    module = _NEEDS_TORCH.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register_when_torch_imports()
