"""The ``fp32-reduce-rows`` miscompile: an fp32 last-dim reduction of more than
:data:`FP32_REDUCE_ROWS` rows returns the rows after the 32nd as zero.

The emulator holds on-device fp32 in DL16, so values upcast on the device (a cast of a 16-bit
float to fp32, and the pointwise results and reductions computed from it) are marked with
:data:`UPCAST_ATTR` while the gap is miscompiled (:func:`fp32_upcast_tag` and the pointwise
propagation, which never change a result); only marked reductions are hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spyre_sim._miscompile_registry import host_of as _host
from spyre_sim._miscompile_registry import register

UPCAST_ATTR = "_spyre_upcast"
"""Attribute set on host results that hold values upcast to fp32 on the device (a cast of a
16-bit float to fp32, and what pointwise ops and reductions compute from it while the
``fp32-reduce-rows`` gap is miscompiled): the emulator stores them in DL16, so this is how the
fp32 reduction below recognises them."""

FP32_REDUCE_ROWS = 32
"""Rows an fp32 last-dim reduction gets right: one per core (torch-spyre #3804)."""

_WIDE = (torch.float32, torch.float64)
_HALF = (torch.float16, torch.bfloat16)


def _upcast(t: Any) -> bool:
    return bool(getattr(_host(t), UPCAST_ATTR, False))


def downcast(t: torch.Tensor) -> torch.Tensor:
    """What a 16-bit cast of ``t``, a device tensor whose host holds upcast values, gives: the
    same values no longer marked. The device stores fp32 as a 16-bit type, so a model's
    ``x.float()`` reads as float16 and its ``.to(torch.float16)`` back is a no-op in PyTorch
    that the emulator never sees; on the device the cast ends the fp32 values, and a
    reduction of the result is a 16-bit one. An unmarked ``t`` is returned as it is."""
    if not _upcast(t):
        return t
    alias: torch.Tensor = torch.ops.aten.alias.default(t)  # a new host view: unmarked
    return alias


def _tag(out: Any) -> None:
    for t in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            setattr(t, UPCAST_ATTR, True)


@register("fp32-reduce-rows", "aten._to_copy")
def fp32_upcast_tag(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Not a corruption: marks a cast of a 16-bit float to fp32 on the device."""
    x = _host(args[0]) if args else None
    if isinstance(x, torch.Tensor) and x.dtype in _HALF and kwargs.get("dtype") in _WIDE:
        _tag(out)
    return None


def _propagate_upcast(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Not a corruption: a pointwise result computed from upcast values is upcast too."""
    if any(_upcast(a) for a in args if isinstance(a, torch.Tensor)):
        _tag(out)
    return None


for _packet in (
    "aten.pow",
    "aten.mul",
    "aten.mul_",
    "aten.add",
    "aten.add_",
    "aten.sub",
    "aten.div",
    "aten.rsqrt",
    "aten.sqrt",
    "aten.neg",
    "aten.abs",
    "aten.exp",
):
    register("fp32-reduce-rows", _packet)(_propagate_upcast)


def _reduces_last_dim(x: torch.Tensor, dims: Any) -> bool:
    if x.dim() < 2:
        return False
    if isinstance(dims, int):
        dims = [dims]
    if not isinstance(dims, (list, tuple)) or len(dims) != 1:
        return False
    return int(dims[0]) % x.dim() == x.dim() - 1


def _fp32_rows(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """An upcast (fp32) reduction over the last dim of more than 32 rows: the rows after the
    32nd read as zero."""
    if not args or not _upcast(args[0]) or not isinstance(out, torch.Tensor):
        return None
    x = _host(args[0])
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    if not _reduces_last_dim(x, dims) or x.numel() // x.shape[-1] <= FP32_REDUCE_ROWS:
        return None
    wrong = out.clone()
    wrong.reshape(-1)[FP32_REDUCE_ROWS:] = 0
    setattr(wrong, UPCAST_ATTR, True)
    return wrong


for _packet in ("aten.mean", "aten.sum"):
    register("fp32-reduce-rows", _packet)(_fp32_rows)
