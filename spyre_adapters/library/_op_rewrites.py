"""Hand-written rewrites of single ATen ops into ops a stack release lowers natively.

PyTorch's decomposition tables hold no form for some ops a model reaches (``aten.histc`` in
the expert routing of mixture-of-experts layers), or hold one made of ops the device cannot
lower either. A rewrite here is an exact reformulation with the same signature as the ATen
overload it replaces, written with elementwise ops, comparisons and reductions only, so that
each op it issues is judged by the release like any other op. Whether a rewrite holds at a
release is not assumed: ``spyre-adapters bridge`` validates it on the device against the CPU
kernel before it is chosen (:mod:`spyre_adapters.enablement.bridge`).

Each rewrite is registered under the overload names it implements with :func:`rewrite`;
:data:`REWRITES` is the table the ``rewrite`` candidate of
:mod:`spyre_adapters.library.op_bridge` reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["REWRITES", "rewrite"]

Rewrite = Callable[..., Any]

#: Overload name (``"aten.histc.default"``) -> its rewrite.
REWRITES: dict[str, Rewrite] = {}


def rewrite(*names: str) -> Callable[[Rewrite], Rewrite]:
    """Register the decorated function as the rewrite of the overloads ``names``."""

    def register(function: Rewrite) -> Rewrite:
        for name in names:
            if name in REWRITES:
                raise ValueError(f"{name} already has a rewrite ({REWRITES[name].__name__})")
            REWRITES[name] = function
        return function

    return register


@rewrite("aten.histc.default")
def histc(
    values: torch.Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0
) -> torch.Tensor:
    """``torch.histc`` as a one-hot count: each element's bin is computed with the CPU
    kernel's formula (``floor((x - lo) * bins / (hi - lo))``, the top edge falling in the last
    bin, elements outside ``[lo, hi]`` and NaN counted nowhere), compared with every bin
    number, and the matches summed. ``min == max`` takes the data's own range (widened by one
    on both sides when that is a single value), as the kernel does. Costs ``numel * bins``
    comparisons: meant for the few bins of expert routing."""
    flat = values.reshape(-1)
    if min == max:
        lo = flat.amin()
        hi = flat.amax()
        same = hi == lo
        lo = torch.where(same, lo - 1, lo)
        hi = torch.where(same, hi + 1, hi)
    else:
        lo = flat.new_full((), min)
        hi = flat.new_full((), max)
    position = torch.floor((flat - lo) * bins / (hi - lo))
    position = torch.where(position >= bins, position - 1, position)  # x == hi: the last bin
    outside = torch.where(flat < lo, True, flat > hi)
    position = torch.where(outside, -1, position)
    numbers = torch.arange(bins, device=flat.device).to(position.dtype)
    counts = (position.unsqueeze(-1) == numbers).sum(0)
    return counts if counts.dtype == values.dtype else counts.to(values.dtype)


@rewrite("aten._grouped_mm.default")
def grouped_mm(
    values: torch.Tensor,
    weights: torch.Tensor,
    offs: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The grouped matmul of expert layers (rows ``offs[e-1]:offs[e]`` of a ``[S, K]`` input
    times expert ``e``'s ``[K, N]`` weight) as one batched matmul of every row with every
    expert and a selection of each row's own expert: rows past ``offs[-1]`` (which the kernel
    leaves unwritten) are zero. Costs ``E`` times the flops of the grouped kernel, and moves
    no expert weight to the host. Only the ``[S, K] x [E, K, N]`` form with ``offs`` (the one
    Transformers' expert layers use) is rewritten."""
    if values.dim() != 2 or weights.dim() != 3 or offs is None or bias is not None:
        raise NotImplementedError(
            "the grouped_mm rewrite covers only [S, K] x [E, K, N] with offs and no bias; "
            f"got {list(values.shape)} x {list(weights.shape)}"
        )
    experts = weights.shape[0]
    every = torch.bmm(values.unsqueeze(0).expand(experts, -1, -1), weights)  # [E, S, N]
    rows = torch.arange(values.shape[0], device=values.device)
    ends = offs.to(rows.dtype)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    own = torch.where(
        rows.unsqueeze(0) >= starts.unsqueeze(1), rows.unsqueeze(0) < ends.unsqueeze(1), False
    )
    picked = torch.where(own.unsqueeze(-1), every, every.new_zeros(()))
    out = picked.sum(0)
    return out if out_dtype is None or out.dtype == out_dtype else out.to(out_dtype)
