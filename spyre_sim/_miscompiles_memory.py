"""Miscompile reproductions of the stack's memory planning: ``mem-pool`` (a buffer that lives
across bundles, the KV cache, gets its pool slot reused) and ``scratchpad-placement`` (a reduced
value found in the first core's scratchpad only).

What each returns is described in :mod:`spyre_sim.miscompile`; sources for each are in
``spyre_sim/data/gaps.toml``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from spyre_sim._miscompile_registry import host_of as _host
from spyre_sim._miscompile_registry import register

#: Whether the stack plans an HBM pool for intermediates: ``HBM_POOL_PLANNING=0`` in the
#: environment turns it off, the upstream workaround of the ``mem-pool`` regression ("fixes
#: it", torch-spyre #3980; #3979 uses the same switch). torch-spyre reads it once, when it is
#: imported, and so does the device: setting it later in the process changes nothing.
POOL_PLANNING = os.environ.get("HBM_POOL_PLANNING", "1").strip() != "0"


@register("mem-pool", "aten.cat")
def mem_pool_cache_concat(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A 4-D cat along dim -2 (KV-cache append) returns its cached part as zeros (while the
    stack plans the pool: not with ``HBM_POOL_PLANNING=0``)."""
    if not POOL_PLANNING:
        return None
    tensors = args[0] if args else kwargs.get("tensors", ())
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if len(tensors) != 2 or not isinstance(out, torch.Tensor) or out.dim() != 4:
        return None
    if any(t.dim() != 4 for t in tensors) or dim % 4 != 2 or tensors[0].shape[-2] == 0:
        return None
    wrong = out.clone()
    wrong.narrow(2, 0, tensors[0].shape[-2]).zero_()
    return wrong


def _core_share(elements: int, stick: int = 64, cores: int = 32) -> int:
    """Elements the first core computes when a result's sticks are divided over the cores."""
    sticks = -(-elements // stick)
    return -(-sticks // cores) * stick


def _scratchpad_broadcast(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A multiply or divide of a tensor of more than one stick by one reduced value of the
    same rank: only the first core finds the value in its scratchpad; the elements past its
    share read as zero."""
    if len(args) < 2 or not isinstance(out, torch.Tensor) or out.dim() == 0:
        return None
    a, b = _host(args[0]), _host(args[1])
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.dim() != b.dim() or not out.is_floating_point():
        return None
    small, large = (b, a) if b.numel() == 1 else (a, b)
    if small.numel() != 1 or large.shape[-1] <= 64:
        return None
    share = _core_share(out.numel())
    if share >= out.numel():
        return None
    wrong = out.clone()
    wrong.reshape(-1)[share:] = 0
    return wrong


for _packet in ("aten.mul", "aten.div"):
    register("scratchpad-placement", _packet)(_scratchpad_broadcast)
