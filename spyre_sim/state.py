"""The process-wide state of the emulated device, in one object: :data:`device_state`.

A real device is one per process, and so is this one: the active stack release, the
switches (:mod:`spyre_sim.settings`), the telemetry counters (:mod:`spyre_sim.telemetry`), the
running-module stack and model-scope depth (:mod:`spyre_sim.scope`), the handlers of refused
ops (:mod:`spyre_sim.refusals`), the once-per-process
warnings already given, the catalogues extended by user releases, and the ``torch.device`` the
device's tensors report. The modules that use a part keep a reference to it; nothing else
holds state. :meth:`DeviceState.reset` puts all of it back as a fresh process has it (tests
call it between cases)::

    from spyre_sim.state import device_state
    device_state.reset()
    device_state.forget_warnings()     # the once-per-process warnings are given again

Plain Python: importing this module imports neither torch nor the catalogue.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from spyre_sim.settings import Settings, settings

if TYPE_CHECKING:
    from spyre_sim.catalogue import Catalogue, Release

__all__ = [
    "FLAT_COUNTS",
    "MODULE_COUNTS",
    "TRANSFER_KEYS",
    "Counters",
    "DeviceState",
    "device_state",
]

TRANSFER_KEYS = (
    "host_to_device",
    "device_to_host",
    "host_to_device_bytes",
    "device_to_host_bytes",
)


#: The counters keyed by one name (an op, a gap) with a plain count.
FLAT_COUNTS = ("fallbacks", "errors")

#: The counters keyed by one name (a gap, an op, an emulator limit) and then by module path
#: (``""``: outside any module forward); :mod:`spyre_sim.telemetry` reads each as a ``GapCount``.
MODULE_COUNTS = ("gaps", "miscompiles", "emulator_limits", "rounding_ties", "nan_made")


class Counters:
    """The telemetry counters the hot path bumps (read through :mod:`spyre_sim.telemetry`)."""

    __slots__ = (
        "emulator_limits",
        "errors",
        "fallbacks",
        "gaps",
        "miscompiles",
        "nan_made",
        "ops",
        "rounding_ties",
        "transfers",
    )

    def __init__(self) -> None:
        self.ops: dict[tuple[str, str], int] = {}
        self.fallbacks: dict[str, int] = {}
        self.transfers: dict[str, int] = dict.fromkeys(TRANSFER_KEYS, 0)
        self.gaps: dict[str, dict[str, int]] = {}
        self.miscompiles: dict[str, dict[str, int]] = {}
        self.errors: dict[str, int] = {}
        self.emulator_limits: dict[str, dict[str, int]] = {}
        self.rounding_ties: dict[str, dict[str, int]] = {}
        self.nan_made: dict[str, dict[str, int]] = {}

    def clear(self) -> None:
        """Forget every count (the dicts stay the same objects)."""
        self.ops.clear()
        for name in (*FLAT_COUNTS, *MODULE_COUNTS):
            getattr(self, name).clear()
        for key in TRANSFER_KEYS:
            self.transfers[key] = 0


class DeviceState:
    """Everything the emulated device remembers between ops (see the module docstring)."""

    def __init__(self, switches: Settings) -> None:
        #: the device switches (the object ``spyre_sim.settings`` names)
        self.settings = switches
        #: the active release (``None``: the newest built-in one, chosen on first use)
        self.release: Release | None = None
        #: bumped whenever the active release changes (keys decision caches)
        self.stack_generation = 0
        self.stack_lock = threading.Lock()
        self.counters = Counters()
        #: the ``nn.Module`` forwards running now, outermost first
        self.module_stack: list[Any] = []
        #: how many ``model_scope()`` blocks are open
        self.scope_depth = 0
        #: dtypes whose downcast, ops whose cpu-fallback, upstream strings whose resolution
        #: were already warned about (each warning is given once per process)
        self.warned_dtypes: set[Any] = set()
        self.warned_fallbacks: set[str] = set()
        self.warned_resolutions: set[str] = set()
        #: the ``out=`` tensors of the op being finished, by schema argument index
        self.out_args: dict[int, Any] = {}
        #: the ``torch.device`` of device tensors (``spyre:0`` once registered)
        self.device: Any = None
        #: the built-in catalogue extended by each user release, and parsed user release files
        self.extended: dict[Release, Catalogue] = {}
        self.user_releases: dict[tuple[str, int, int], Release] = {}
        #: op -> the handler computing its refused calls (:mod:`spyre_sim.refusals`)
        self.refusal_handlers: dict[Any, Any] = {}
        #: whether a device tensor ever carried wide values (:mod:`spyre_sim._wide_values`):
        #: until then no op looks for them. Never reset: such a tensor may outlive a reset.
        self.wide_seen = False
        #: whether an emulator limit was met since :func:`spyre_sim.limits.reset`, and the
        #: storages (by address) the device wrote since then (:mod:`spyre_sim.limits`)
        self.limit_met = False
        self.limit_written: set[int] = set()
        self.limit_overflow = False  # more storages written than it notes: all count

    def forget_warnings(self) -> None:
        """Give the once-per-process warnings again."""
        self.warned_dtypes.clear()
        self.warned_fallbacks.clear()
        self.warned_resolutions.clear()

    def reset(self) -> None:
        """Back to the state of a fresh process: the default release and switches, no counts,
        no running module or model scope, no warning given. (Registration with torch, parsed
        catalogues and per-op caches stay: they depend on nothing here but the generation.)"""
        with self.stack_lock:
            if self.release is not None:
                self.release = None
                self.stack_generation += 1
        for name in ("numerics", "layout_checks", "judge_harness"):
            if getattr(self.settings, name) is not True:
                setattr(self.settings, name, True)
        self.counters.clear()
        self.module_stack.clear()
        self.scope_depth = 0
        self.out_args.clear()
        self.refusal_handlers.clear()
        self.limit_met = False
        self.limit_written.clear()
        self.limit_overflow = False
        self.forget_warnings()


#: The one device of the process.
device_state = DeviceState(settings)
