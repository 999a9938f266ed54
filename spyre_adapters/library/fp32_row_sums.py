"""fp32 sums and means over the last dim computed as a product with a column of ones while the
release miscompiles fp32 reductions over more than 32 rows (gap ``fp32-reduce-rows``): the
``fp32-row-sums`` adapter.

At 2026.07 the stack holds fp32 on the device inside norms, and an fp32 ``mean(-1)`` or
``sum(-1)`` whose leading dims hold more than 32 rows (one per core) returns the rows after the
32nd as zero (torch-spyre #3804, fixed Aug 24; ``spyre_sim/data/gaps.toml``). Every norm that
computes its statistics in fp32 hits it once a prompt is longer than 32 tokens: the stock
RMSNorm and LayerNorm upcasts, ``layernorm-two-pass`` 2.x, and an RMSNorm whose input is
already fp32 (Mamba's ``residual_in_fp32`` stream into its last norm, which ``rms-norm``
1.1.0 computes "at the input dtype", so in fp32: the differential campaign, seed 20261207,
missed at 2026.07).

While the release miscompiles such reductions, the model's forwards run under a mode of kind
``fp32-row-sums`` that computes ``x.sum(-1)`` and ``x.mean(-1)`` (also ``torch.sum``,
``torch.mean``, ``dim=[-1]``, ``keepdim``, a floating ``dtype``) of a floating tensor with more
than 32 rows as ``x.float() @ ones`` (the reduction dim zero-padded to whole sticks, as every
matmul of the stick-layout rewrites), divided by the length for a mean, and cast to the dtype
the stock call returns. A matmul reduces no rows: the device computes it right for any number
of rows. Every 16-bit tensor is taken too: the device holds fp32 in a 16-bit type, so an
upcast value reads as 16-bit at the torch level and only the device knows it is fp32. Every
row sum is the stock fp32 sum up to the order of its additions (the CPU's reduction and its
BLAS order them differently: fp32 rounding apart); infinities and NaN reach the sum as in the
stock reduction (``x * 1``; the padding adds ``0 * 0``). Every other call, and every reduction
of 32 rows or fewer or of another dim, is left alone. Where the release reduces right, the mode
is not entered. Nothing of the model changes: parameters, the state dict and every output's
shape are stock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import spyre_sim
from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _matrix, padded_matmul

__all__ = ["KIND", "ROWS", "Fp32RowSums", "Fp32RowSumsMode", "adapter", "row_sum"]

KIND = "fp32-row-sums"
#: rows an fp32 last-dim reduction gets right at the release that miscompiles it
ROWS = 32
_WIDE = (torch.float32, torch.float64)
_SUM = frozenset({torch.sum, torch.Tensor.sum})
_MEAN = frozenset({torch.mean, torch.Tensor.mean})
_PLAIN = frozenset({"dim", "keepdim", "dtype"})


def row_sum(x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """``x.sum(-1, keepdim=keepdim)`` as ``x @ ones`` (the reduction dim padded to sticks)."""
    width = x.shape[-1]
    ones = _matrix(width, 1, tuple((i, 0) for i in range(width)), x)
    summed = padded_matmul(x, ones)
    return summed if keepdim else summed.squeeze(-1)


def _last_dim_only(x: torch.Tensor, dim: Any) -> bool:
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and not isinstance(dim, bool) and dim % x.dim() == x.dim() - 1


def _reduction(
    args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[torch.Tensor, bool, torch.dtype | None] | None:
    """``(x, keepdim, dtype)`` when the call reduces the last dim of a floating tensor of more
    than :data:`ROWS` rows, with nothing but ``dim``, ``keepdim`` and a floating ``dtype``."""
    if not args or not isinstance(args[0], torch.Tensor) or set(kwargs) - _PLAIN:
        return None
    x = args[0]
    named = dict(zip(("dim", "keepdim", "dtype"), args[1:], strict=False))
    if len(args) > 4 or set(named) & set(kwargs):
        return None
    named.update(kwargs)
    dtype = named.get("dtype")
    if not x.is_floating_point() or x.dim() < 2:
        return None
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        return None
    if not _last_dim_only(x, named.get("dim")) or x.shape[-1] == 0:
        return None
    if x.numel() // x.shape[-1] <= ROWS:
        return None
    return x, bool(named.get("keepdim", False)), dtype


class Fp32RowSumsMode(TorchFunctionMode):
    """Computes fp32 last-dim sums and means of more than 32 rows as products (module doc)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _SUM or func in _MEAN:
            found = _reduction(args, kwargs)
            if found is not None:
                x, keepdim, dtype = found
                out_dtype = dtype if dtype is not None else x.dtype
                x = x.to(out_dtype)  # the stock call casts to ``dtype`` before it reduces
                wide = x if x.dtype in _WIDE else x.float()  # fp32 sums, as the stock kernel
                summed = row_sum(wide, keepdim)
                result = summed / x.shape[-1] if func in _MEAN else summed
                return result.to(out_dtype)
        return func(*args, **kwargs)


def _reductions_miscompiled() -> bool:
    state = spyre_sim.current_stack().gap_state("fp32-reduce-rows")
    return state is spyre_sim.GapState.MISCOMPILED


def _factory(settings: frozenset[object]) -> contextlib.AbstractContextManager[Any]:
    return Fp32RowSumsMode() if _reductions_miscompiled() else contextlib.nullcontext()


register_kind(KIND, _factory)


class Fp32RowSums:
    """The ``fp32-row-sums`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return any(p.is_floating_point() for p in model.parameters())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        enable_kind(model, edit, KIND, frozenset())


adapter = Fp32RowSums()
