"""``softmax-input-dtype`` 1.1: 1.0's softmax at the input dtype, for device tensors only.

1.0 (:mod:`spyre_adapters.library.softmax_input_dtype`) turns ``.float()`` and
``.to(torch.float32)`` of every half-precision tensor into no-ops inside the forwards it binds,
host tensors included. A cast on the host is no device op, so the gap (``dtype-cast``) does not
concern it, and another adapter's host computation inside such a forward lost its cast:
SuperPoint's forward calls ``softmax``, and ``host-patch-embed`` convolves its 1x1 convolutions
on the host as ``input.cpu().to(weight.dtype)`` with float32 weights, which the mode left half,
so ``conv2d`` refused the mix (LightGlue and SuperGlue failed every test as an adapter error at
the releases before 2026.06). 1.1 drops the softmax upcast and the casts of tensors off the host
only; a host tensor is cast as asked. Everything else is 1.0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from spyre_adapters.library.softmax_input_dtype import (
    _HALF,
    InputDtypeSoftmaxMode,
    SoftmaxInputDtype,
)

__all__ = ["DeviceInputDtypeSoftmaxMode", "SoftmaxInputDtypeV11", "adapter"]

_MARK = "_spyre_input_dtype_softmax_v1_1"


class DeviceInputDtypeSoftmaxMode(InputDtypeSoftmaxMode):
    """1.0's mode, acting on half-precision tensors off the host only."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and first.dtype in _HALF and first.device.type == "cpu":
            return func(*args, **(kwargs or {}))  # a host tensor: cast as asked
        return super().__torch_function__(func, types, args, kwargs)


class SoftmaxInputDtypeV11(SoftmaxInputDtype):
    """``softmax-input-dtype`` 1.1 (see the module docstring)."""

    mode = DeviceInputDtypeSoftmaxMode
    mark = _MARK


adapter = SoftmaxInputDtypeV11()
