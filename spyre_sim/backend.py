"""The backend module PyTorch exposes as ``torch.spyre`` once the device is registered.

``torch.spyre.is_available()``, ``device_count()``, ``current_device()``,
``memory_allocated()`` (bytes of the storages behind live ``spyre`` tensors, each storage
counted once), ``max_memory_allocated()``, ``memory_reserved()`` and ``max_memory_reserved()``
(the same figures: there is no caching allocator), ``reset_peak_memory_stats()``,
``reset_accumulated_memory_stats()``, ``memory_stats()``, ``synchronize()``, ``empty_cache()``,
``manual_seed(_all)``. The same functions answer ``torch.accelerator``'s memory API while
``spyre`` is the accelerator (:func:`spyre_sim.device.register`). There is one device, index 0:
``set_device`` of any other index raises :class:`~spyre_sim.errors.SpyreDeviceIndexError`.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_sim import _tensor
from spyre_sim.errors import SpyreDeviceIndexError

__all__ = [
    "current_device",
    "device_count",
    "empty_cache",
    "get_amp_supported_dtype",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_device",
    "synchronize",
]

_peak = 0


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device: Any) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index not in (None, 0):
        raise SpyreDeviceIndexError(index)


def synchronize(device: Any = None) -> None:
    """Nothing to wait for: the emulated device runs eagerly on the host."""


def empty_cache() -> None:
    """No caching allocator: storages are freed with their last tensor."""


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live ``spyre`` tensors (shared storages counted once)."""
    global _peak
    now = _tensor.memory_allocated()
    _peak = max(_peak, now)
    return now


def max_memory_allocated(device: Any = None) -> int:
    """Peak of :func:`memory_allocated` as observed by calls to it (no allocator hooks)."""
    memory_allocated()
    return _peak


def reset_peak_memory_stats(device: Any = None) -> None:
    global _peak
    _peak = _tensor.memory_allocated()


def memory_reserved(device: Any = None) -> int:
    """What is allocated: without a caching allocator nothing else is held."""
    return memory_allocated()


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated()


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """No accumulated counters are kept: nothing to reset."""


def memory_stats(device: Any = None) -> dict[str, int]:
    return {
        "allocated_bytes.all.current": memory_allocated(),
        "allocated_bytes.all.peak": _peak,
    }


def manual_seed(seed: int) -> None:
    """Random numbers are drawn on the host (cpu-fallback) from the host generator, which
    ``torch.manual_seed`` seeds (and which calls this): nothing else to seed."""


def manual_seed_all(seed: int) -> None:
    """See :func:`manual_seed`."""


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False
