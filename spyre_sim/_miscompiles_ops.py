"""Miscompile reproductions of single ops' results: ``rotate-half`` (the ``neg`` mark and the
``cat``), ``layernorm-nan``, ``indexed-dim``, ``topk-largest``, ``pow-cube``, ``eps-underflow``
(recorded, not changed: the flush already happened in the stored result), and the
:func:`generic_corruption` of any other gap whose op rule says ``miscompiled``.

What each returns is described in :mod:`spyre_sim.miscompile`; sources for each are in
``spyre_sim/data/gaps.toml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spyre_sim._miscompile_registry import Unheld, register, register_mark
from spyre_sim._miscompile_registry import host_of as _host
from spyre_sim.numerics import DL16_MIN_NORMAL

NEAR_CONSTANT_VARIANCE = 1e-6
"""A LayerNorm row whose biased variance is below this counts as near-constant."""

NEG_SOURCE_ATTR = "_spyre_neg_source"
"""Attribute set on the output wrapper of ``neg`` (while ``rotate-half`` is miscompiled): the
host tensor that was negated. Read at ``cat`` to recognise the rotate_half pattern."""


@register_mark("rotate-half", "aten.neg")
def neg_of_a_slice(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, Any] | None:
    """``neg`` of part of a larger tensor (a slice): its result carries the host tensor that
    was negated (:data:`NEG_SOURCE_ATTR`), so that ``cat`` can see the rotate_half pattern."""
    h = getattr(args[0], "_host", None) if args else None  # a device tensor's host
    if isinstance(h, torch.Tensor) and h.untyped_storage().nbytes() > h.numel() * h.element_size():
        return NEG_SOURCE_ATTR, h
    return None


@register("rotate-half", "aten.cat")
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


@register("layernorm-nan", "aten.native_layer_norm")
def layer_norm_nan(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Rows with variance below :data:`NEAR_CONSTANT_VARIANCE` come back as NaN.

    The variance is the input row's, in float64: reading it back from the stored ``rstd``
    (``(var + eps) ** -0.5`` in 16 bits) cannot tell a near-constant row once ``eps`` is large,
    e.g. Transformers' tests set every norm's ``eps`` to 1.0, where ``rstd`` stores as 1.0 for
    any variance below about 1e-3 and every row looked near-constant."""
    result, mean, rstd = out
    source = _host(args[0]) if args else None
    shape = args[1] if len(args) > 1 else kwargs.get("normalized_shape")
    if not isinstance(source, torch.Tensor) or not isinstance(shape, (list, tuple)) or not shape:
        return None
    dims = tuple(range(source.dim() - len(shape), source.dim()))
    variance = source.double().var(dim=dims, correction=0, keepdim=True)
    rows = variance < NEAR_CONSTANT_VARIANCE
    if not bool(rows.any()):
        return None
    result = result.masked_fill(rows, float("nan"))
    return (result, mean, rstd)


#: The emulator limit counted where a DL16 number is lost to the fp16 host tensors.
EMULATOR_LIMIT = "fp16-holder"


def _flushed_bound(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``eps-underflow``: the result itself (the host op computed it with the bound stored in
    the result's 16-bit type, i.e. zero) when the positive lower bound was flushed to zero
    and some input value lies below the bound, where keeping it would have changed the result,
    and the bound is below DL16's smallest number (see :func:`_lost`); ``None`` otherwise."""
    bound = args[1] if len(args) > 1 else kwargs.get("min")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 < bound < 1e-4:
        return None
    if not isinstance(out, torch.Tensor) or out.dtype not in (torch.float16, torch.bfloat16):
        return None
    if torch.tensor(bound, dtype=out.dtype).item() != 0.0:
        return None
    source = _host(args[0]).float()  # compared in its own 16-bit type, the bound would be 0
    if not bool((source < bound).any()):
        return None
    return _lost(out, bound)


def _lost(out: torch.Tensor, value: float) -> torch.Tensor | Unheld:
    """``out`` when ``value`` is below DL16's smallest number (the device's miscompile);
    :class:`Unheld` when DL16 holds it and only the emulator's fp16 host tensors lost it (from
    2**-30 to fp16's smallest subnormal, 6e-8): the device then computes the op again with its
    DL16 values kept, or counts the emulator limit, which the report tells apart from the
    device's wrong numbers."""
    if value < DL16_MIN_NORMAL:
        return out
    return _UNHELD


_UNHELD = Unheld(EMULATOR_LIMIT)


# The in-place forms follow the same rules. Their reproduction reads the written input: with
# the bound (or addend) zero in the 16-bit type, the write changes no value that decides the
# match (a value below the bound stays below it, a zero plus the flushed addend stays zero).
for _packet in ("aten.clamp_min", "aten.clamp", "aten.clamp_"):
    register("eps-underflow", _packet)(_flushed_bound)


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a Python number (not a bool), else ``None``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _lost_addend(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``eps-underflow``: the result itself of ``x + eps`` (or ``x - eps``) whose number
    ``eps * alpha`` is zero in the result's 16-bit type (TAPAS's ``count + 1e-10`` before a
    division), when some ``|x|`` lies below ``|eps|``: there the CPU's sum is about ``eps`` and
    the device's is ``x`` (a count of zero stays zero, and the division after it gives 0/0), and
    ``eps`` is below DL16's smallest number (see :func:`_lost`); ``None`` otherwise."""
    addend = _number(args[1] if len(args) > 1 else kwargs.get("other"))
    alpha = _number(kwargs.get("alpha", 1))
    if addend is None or alpha is None:
        return None
    value = abs(addend * alpha)
    if not 0 < value < 1e-4:
        return None
    if not isinstance(out, torch.Tensor) or out.dtype not in (torch.float16, torch.bfloat16):
        return None
    if torch.tensor(value, dtype=out.dtype).item() != 0.0:
        return None
    source = _host(args[0]) if args else None
    if not isinstance(source, torch.Tensor) or not source.is_floating_point():
        return None
    if not bool((source.float().abs() < value).any()):
        return None
    return _lost(out, value)


for _packet in ("aten.add", "aten.sub", "aten.add_", "aten.sub_"):
    register("eps-underflow", _packet)(_lost_addend)


@register("indexed-dim", "aten.index_select")
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


# --- newer evidence (docs/STACK.md §8) --------------------------------------------------------


@register("topk-largest", "aten.topk")
def topk_largest_dropped(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``largest=False`` is dropped: the k largest values (and their indices) come back."""
    largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
    if largest:
        return None
    x = _host(args[0])
    k = args[1] if len(args) > 1 else kwargs["k"]
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    values, indices = torch.topk(x, k, dim=dim, largest=True, sorted=True)
    return (values, indices)


def _exponent(args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("exponent")


@register("pow-cube", "aten.pow")
def pow_cube_abs4(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """``pow(x, 3)`` returns ``|x| ** 4`` (the sign and the exponent are lost)."""
    exponent = _exponent(args, kwargs)
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent != 3:
        return None
    x = _host(args[0])
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return None
    square = x * x
    return square * square
