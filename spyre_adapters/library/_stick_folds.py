"""Matmuls that PyTorch folds into one ``mm`` although both operands are batched.

:mod:`spyre_adapters.library._stick_layout` pads the reduction dim K of a ``torch.matmul``
that reaches ``mm`` (the op the device's stick-align rule checks), and judges that by the
operands' ranks: one of them 2-D. PyTorch folds more than that: a 3-D operand times a 3-D one
of batch 1 is one ``mm`` too. Parakeet's relative positions (``inv_freq[None, :, None]`` expanded
to ``[B, F, 1]`` times ``positions[None, None, :]``), an outer product with K = 1, reach the
device as ``mm [B*F, 1] @ [1, L]``, which it refuses.

This mode (kind ``stick-layout-folds``; entered after ``stick-layout``, so it sees each call
first) asks PyTorch itself which op the call reaches, on meta tensors of the operands' shapes
(cached per pair of shapes), and pads K with zeros (exact) when it is ``mm`` and K is not a
whole number of sticks. Every other call goes on to ``stick-layout`` unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import STICK, _floating, padded_matmul

__all__ = ["KIND", "StickFolds", "folds_to_mm"]

KIND = "stick-layout-folds"
_MATMULS = frozenset({torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__})


class _ReachesMm(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.mm = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.mm = self.mm or func is torch.ops.aten.mm.default
        return func(*args, **(kwargs or {}))


@functools.lru_cache(maxsize=1024)
def folds_to_mm(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether ``torch.matmul`` of operands of shapes ``a`` and ``b`` reaches ``aten.mm``,
    as the installed PyTorch decides it (its folding rules change between releases)."""
    if len(a) < 2 or len(b) < 2:
        return False
    with _disable_current_modes(), torch._C.DisableTorchFunction(), _ReachesMm() as seen:
        torch.matmul(torch.empty(a, device="meta"), torch.empty(b, device="meta"))
    return bool(seen.mm)


class StickFolds(TorchFunctionMode):
    """The mode (see the module docstring); ``features`` is kept for the kind's factory."""

    def __init__(self, features: frozenset[str]) -> None:
        super().__init__()
        self.features = features

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        matmul = func in _MATMULS or func is torch.Tensor.__rmatmul__
        if matmul and len(args) == 2 and not kwargs:
            a, b = (args[1], args[0]) if func is torch.Tensor.__rmatmul__ else args
            if (
                _floating(a)
                and _floating(b)
                and a.dim() >= 2
                and a.shape[-1] % STICK
                and folds_to_mm(tuple(a.shape), tuple(b.shape))
            ):
                return padded_matmul(a, b)
        return func(*args, **kwargs)


register_kind(KIND, StickFolds)
