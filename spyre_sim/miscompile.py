"""Deterministic reproductions of the device's documented miscompiles.

A miscompile compiles and runs but returns wrong numbers with no error (SPYRE.md section 4).
Each reproduction here is keyed by its gap id and the ATen packet it acts on; the device applies
it when the catalogue says the gap is ``miscompiled`` at the active release (or an op rule's
decision is ``miscompiled`` for that gap), and records it in telemetry with the module path.

- ``rotate-half`` (:func:`rotate_half_concat`): approximates the stock slice + neg + cat RoPE
  (``cat([-x[..., d/2:], x[..., :d/2]], -1)``) in fp16. The device recognises the pattern at
  the ``cat``: two same-shape fp16 halves of one tensor's last dim, the first produced by
  ``neg`` of the second half. Its wrong result is ``cat([x2, -x1])`` (the negation lands on the
  other half), i.e. ``-rotate_half(x)``: RoPE then rotates by minus the angle. The real
  miscompile's error (max 5.2) has the same scale: twice the rotated values.
- ``layernorm-nan`` (:func:`layer_norm_nan`): ``native_layer_norm`` returns NaN rows for
  near-constant rows: rows whose biased variance is below :data:`NEAR_CONSTANT_VARIANCE`.
- ``indexed-dim`` (:func:`indexed_dim_rows`): ``index_select`` along a dim that is not the
  outermost returns the selected rows in reverse order ("rows silently wrong").
- ``sdpa-strided`` (:func:`sdpa_strided_read`): SDPA with a non-contiguous q, k or v view
  (e.g. ``q_proj(x).view(b, s, h, d).transpose(1, 2)``) reads that tensor as if its memory
  were laid out contiguously in the ``[..., S, H, D]`` order: each operand ``x`` of shape
  ``[..., H, S, D]`` becomes ``x.contiguous().reshape(..., S, H, D).transpose(-3, -2)``, which
  mixes heads and positions.
- ``mem-pool`` (:func:`mem_pool_cache_concat`): the Aug 2026 pool-planning regression. Buffers
  that live across bundles (the KV cache) get their pool slot reused: a 4-D ``cat`` along the
  sequence dim (-2) — a KV-cache append in decode — returns the cached part as zeros. Prefill
  is unaffected; generated tokens after the first diverge.
- any other gap whose op rule says ``miscompiled`` (:func:`generic_corruption`): the first
  stick (64 elements) of the result reads as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "NEAR_CONSTANT_VARIANCE",
    "Miscompile",
    "generic_corruption",
    "indexed_dim_rows",
    "layer_norm_nan",
    "miscompiles_for",
    "mem_pool_cache_concat",
    "rotate_half_concat",
    "sdpa_strided_read",
]

NEAR_CONSTANT_VARIANCE = 1e-6
"""A LayerNorm row whose biased variance is below this counts as near-constant."""

NEG_SOURCE_ATTR = "_spyre_neg_source"
"""Attribute set on the output wrapper of ``neg`` (while ``rotate-half`` is miscompiled): the
host tensor that was negated. Read at ``cat`` to recognise the rotate_half pattern."""

# apply(wrapped args, kwargs, host result) -> wrong host result, or None if the pattern is absent
Apply = Callable[[Sequence[Any], dict[str, Any], Any], Any]


@dataclass(frozen=True)
class Miscompile:
    gap: str
    packet: str
    apply: Apply


_BY_PACKET: dict[str, list[Miscompile]] = {}


def _register(gap: str, packet: str) -> Callable[[Apply], Apply]:
    def add(fn: Apply) -> Apply:
        _BY_PACKET.setdefault(packet, []).append(Miscompile(gap, packet, fn))
        return fn

    return add


def miscompiles_for(packet: str) -> tuple[Miscompile, ...]:
    """Reproductions registered for an ATen packet."""
    return tuple(_BY_PACKET.get(packet, ()))


def registered() -> tuple[Miscompile, ...]:
    """Every registered reproduction."""
    return tuple(m for found in _BY_PACKET.values() for m in found)


def _host(t: Any) -> Any:
    return getattr(t, "_host", t)


@_register("rotate-half", "aten.cat")
def rotate_half_concat(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``cat([-x2, x1], -1)`` of two fp16 halves of one tensor returns ``cat([x2, -x1], -1)``."""
    tensors = args[0] if args else kwargs.get("tensors", ())
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if len(tensors) != 2:
        return None
    neg, x1 = tensors
    x2 = getattr(neg, NEG_SOURCE_ATTR, None)
    h1 = _host(x1)
    if x2 is None or not isinstance(h1, torch.Tensor) or h1.dtype is not torch.float16:
        return None
    if h1.dim() == 0 or dim % h1.dim() != h1.dim() - 1 or x2.shape != h1.shape:
        return None
    if x2.untyped_storage().data_ptr() != h1.untyped_storage().data_ptr():
        return None  # not two halves of one tensor
    return torch.cat([x2, -h1], dim=-1)


@_register("layernorm-nan", "aten.native_layer_norm")
def layer_norm_nan(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Rows with variance below :data:`NEAR_CONSTANT_VARIANCE` come back as NaN."""
    result, mean, rstd = out
    eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
    threshold = (NEAR_CONSTANT_VARIANCE + float(eps)) ** -0.5
    rows = rstd > threshold
    if not bool(rows.any()):
        return None
    result = result.masked_fill(rows, float("nan"))
    return (result, mean, rstd)


@_register("indexed-dim", "aten.index_select")
def indexed_dim_rows(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``index_select`` along a non-outermost dim returns the rows reversed."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or dim % out.dim() == 0:
        return None
    return out.flip(dim)


def generic_corruption(out: Any) -> Any:
    """The first stick of the (first) result reads as zero; ``None`` if there is nothing to
    corrupt."""
    first = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(first, torch.Tensor) or first.numel() == 0 or first.is_complex():
        return None
    wrong = first.clone()
    wrong.view(-1)[:64] = 0
    if isinstance(out, (tuple, list)):
        return type(out)([wrong, *out[1:]])
    return wrong


def _strided_read(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 3 or x.is_contiguous():
        return x
    *lead, h, n, d = x.shape
    return x.contiguous().reshape(*lead, n, h, d).transpose(-3, -2)


@_register("sdpa-strided", "aten.scaled_dot_product_attention")
def sdpa_strided_read(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Non-contiguous q/k/v are read with heads and positions mixed (see module doc)."""
    q, k, v = (_host(t) for t in args[:3])
    if q.is_contiguous() and k.is_contiguous() and v.is_contiguous():
        return None
    rest = [_host(a) for a in args[3:]]
    host_kwargs = {name: _host(value) for name, value in kwargs.items()}
    return torch.ops.aten.scaled_dot_product_attention.default(
        _strided_read(q), _strided_read(k), _strided_read(v), *rest, **host_kwargs
    )


@_register("mem-pool", "aten.cat")
def mem_pool_cache_concat(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A 4-D cat along dim -2 (KV-cache append) returns its cached part as zeros."""
    tensors = args[0] if args else kwargs.get("tensors", ())
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if len(tensors) != 2 or not isinstance(out, torch.Tensor) or out.dim() != 4:
        return None
    if any(t.dim() != 4 for t in tensors) or dim % 4 != 2 or tensors[0].shape[-2] == 0:
        return None
    wrong = out.clone()
    wrong.narrow(2, 0, tensors[0].shape[-2]).zero_()
    return wrong
