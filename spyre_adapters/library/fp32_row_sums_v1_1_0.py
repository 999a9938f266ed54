"""fp32 last-dim sums and means as products while the release miscompiles fp32 reductions
(gap ``fp32-reduce-rows``): the ``fp32-row-sums`` adapter, version 1.1.0.

1.0.0 computed a mean as the row sum ``x @ ones`` divided by the length afterwards. The device
stores that sum: for a norm's statistics, a sum of squares, it can be far larger than the mean
the stock kernel stores. CPMAnt's residual stream reaches 7.3e4 at realistic sizes; the sum of
squares of a row, 1.0e11, is beyond DL16's largest number (about 8.6e9) while the mean, 4.0e8,
is not: with 1.0.0 its logits were at cosine 0.76 to the CPU's at 2026.07, with no error.

1.1.0 takes the mean of ``n`` values as ``x @ c`` with a column ``c`` of ``2**-k`` (``2**k``
the smallest power of two at least ``n``), divided by ``n * 2**-k``. Scaling by a power of two
is exact, so the product is the sum scaled down and never exceeds the largest ``|x|``; the
product accumulates in fp32 (no per-element rounding); the last division is by an exact
DL16 number in ``(0.5, 1]``, one rounding as the stock mean's division by ``n``. Sums are as in
1.0.0 (the stock sum stores the same number). Everything else is 1.0.0's.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import fp32_row_sums as base
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _matrix, padded_matmul

__all__ = ["KIND", "Fp32RowSumsScaled", "Fp32RowMeansMode", "adapter", "row_mean"]

KIND = "fp32-row-sums-1.1"


def row_mean(x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """``x.mean(-1, keepdim=keepdim)`` as ``(x @ 2**-k) / (n * 2**-k)`` (module docstring)."""
    width = x.shape[-1]
    k = max(0, math.ceil(math.log2(width)))
    column = _matrix(width, 1, tuple((i, 0) for i in range(width)), x) * 2.0**-k
    scaled_sum = padded_matmul(x, column)
    mean = scaled_sum / (width * 2.0**-k)
    return mean if keepdim else mean.squeeze(-1)


class Fp32RowMeansMode(base.Fp32RowSumsMode):
    """1.0.0's mode with means taken as scaled products (module docstring)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in base._MEAN:
            found = base._reduction(args, kwargs)
            if found is not None:
                x, keepdim, dtype = found
                out_dtype = dtype if dtype is not None else x.dtype
                x = x.to(out_dtype)
                wide = x if x.dtype in base._WIDE else x.float()
                return row_mean(wide, keepdim).to(out_dtype)
        return super().__torch_function__(func, types, args, kwargs)


def _factory(settings: frozenset[object]) -> Any:
    return Fp32RowMeansMode() if base._reductions_miscompiled() else base._factory(settings)


register_kind(KIND, _factory)


class Fp32RowSumsScaled(base.Fp32RowSums):
    """The ``fp32-row-sums`` adapter, version 1.1.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        enable_kind(model, edit, KIND, frozenset())


adapter = Fp32RowSumsScaled()
