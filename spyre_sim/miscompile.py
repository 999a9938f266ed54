"""Deterministic reproductions of the device's documented miscompiles.

A miscompile compiles and runs but returns wrong numbers with no error (docs/STACK.md §4).
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
- ``topk-largest`` (:func:`topk_largest_dropped`): ``topk(largest=False)`` returns the k
  largest values and their indices.
- ``pow-cube`` (:func:`pow_cube_abs4`): ``pow(x, 3)`` returns ``|x| ** 4``.
- ``fp32-reduce-rows`` (:func:`fp32_upcast_tag`, and the reductions): an fp32 ``mean``/``sum``
  over the last dim of more than :data:`FP32_REDUCE_ROWS` rows returns the rows after the 32nd
  as zero. The emulator holds on-device fp32 in DL16, so values upcast on the device (a cast
  of a 16-bit float to fp32, and the pointwise results and reductions computed from it) are
  marked with :data:`UPCAST_ATTR` while the gap is miscompiled; only marked reductions are hit.
- ``sdpa-seq-align`` (:func:`sdpa_partial_key_stick`): SDPA whose key length spans more than
  one stick with a partial last stick: the keys of that stick score zero.
- ``offset-view-input`` (:func:`offset_view_clone`, :func:`offset_view_sdpa`): a copy or an
  attention whose operand is a view starting inside a row of the buffer it was cut from (the
  row pitch read off the view's strides) reads from the start of that row: packed QKV reads
  Q's slice for K and V.
- ``decode-query-layout`` (:func:`decode_query_heads`): SDPA with one query position whose
  heads sit inside the stick row (a ``[B, 1, H, D]`` buffer viewed ``[B, H, 1, D]``) reads the
  query heads in reverse order.
- ``scratchpad-placement`` (``_scratchpad_broadcast``): a multiply or divide of a tensor of
  more than one stick by a single reduced value of the same rank: the elements past the first
  core's share (sticks divided over 32 cores) read as zero.
- any other gap whose op rule says ``miscompiled`` (:func:`generic_corruption`): the first
  stick (64 elements) of the result reads as zero.

Every reproduction is registered with :func:`_register` (gap id, ATen packet); a function that
only marks a result (``fp32-reduce-rows``'s upcasts) returns ``None``. A note on a result that
a later reproduction reads, set on the result's wrapper, is a :class:`Mark`
(``rotate-half``'s ``neg``: :func:`neg_of_a_slice`), registered with :func:`_register_mark`. Sources for each are in ``spyre_sim/data/gaps.toml``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "FP32_REDUCE_ROWS",
    "NEAR_CONSTANT_VARIANCE",
    "SDPA_STICK",
    "UPCAST_ATTR",
    "Mark",
    "Miscompile",
    "decode_query_heads",
    "fp32_upcast_tag",
    "offset_view_clone",
    "offset_view_sdpa",
    "pow_cube_abs4",
    "sdpa_partial_key_stick",
    "topk_largest_dropped",
    "generic_corruption",
    "indexed_dim_rows",
    "layer_norm_nan",
    "marks_for",
    "miscompiles_for",
    "neg_of_a_slice",
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


# mark(wrapped args, kwargs) -> (attribute, value) to set on the result's wrapper, or None
MarkFn = Callable[[Sequence[Any], dict[str, Any]], "tuple[str, Any] | None"]


@dataclass(frozen=True)
class Mark:
    """Not a corruption: a note on an op's result that a later op's reproduction reads (while
    ``gap`` is miscompiled), e.g. ``neg`` of a slice, for ``rotate-half``'s ``cat``."""

    gap: str
    packet: str
    mark: MarkFn


_MARKS: dict[str, list[Mark]] = {}


def _register_mark(gap: str, packet: str) -> Callable[[MarkFn], MarkFn]:
    def add(fn: MarkFn) -> MarkFn:
        _MARKS.setdefault(packet, []).append(Mark(gap, packet, fn))
        return fn

    return add


def marks_for(packet: str) -> tuple[Mark, ...]:
    """Marks registered for an ATen packet."""
    return tuple(_MARKS.get(packet, ()))


def registered_marks() -> tuple[Mark, ...]:
    """Every registered mark."""
    return tuple(m for found in _MARKS.values() for m in found)


def miscompiles_for(packet: str) -> tuple[Miscompile, ...]:
    """Reproductions registered for an ATen packet."""
    return tuple(_BY_PACKET.get(packet, ()))


def registered() -> tuple[Miscompile, ...]:
    """Every registered reproduction."""
    return tuple(m for found in _BY_PACKET.values() for m in found)


def _host(t: Any) -> Any:
    return getattr(t, "_host", t)


@_register_mark("rotate-half", "aten.neg")
def neg_of_a_slice(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, Any] | None:
    """``neg`` of part of a larger tensor (a slice): its result carries the host tensor that
    was negated (:data:`NEG_SOURCE_ATTR`), so that ``cat`` can see the rotate_half pattern."""
    h = getattr(args[0], "_host", None) if args else None  # a device tensor's host
    if isinstance(h, torch.Tensor) and h.untyped_storage().nbytes() > h.numel() * h.element_size():
        return NEG_SOURCE_ATTR, h
    return None


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


# --- newer evidence (docs/STACK.md §8) --------------------------------------------------------


@_register("topk-largest", "aten.topk")
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


@_register("pow-cube", "aten.pow")
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


def _tag(out: Any) -> None:
    for t in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            setattr(t, UPCAST_ATTR, True)


@_register("fp32-reduce-rows", "aten._to_copy")
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
    _register("fp32-reduce-rows", _packet)(_propagate_upcast)


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
    _register("fp32-reduce-rows", _packet)(_fp32_rows)


def _sdpa_operands(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    hosts = [_host(a) for a in args]
    return hosts, {name: _host(value) for name, value in kwargs.items()}


def _sdpa(hosts: Sequence[Any], host_kwargs: dict[str, Any]) -> Any:
    return torch.ops.aten.scaled_dot_product_attention.default(*hosts, **host_kwargs)


SDPA_STICK = 64
"""Keys per stick of the score matmul (fp16): the alignment SDPA's key length needs."""


@_register("sdpa-seq-align", "aten.scaled_dot_product_attention")
def sdpa_partial_key_stick(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A key length of more than one stick whose last stick is partial: the keys in that
    partial stick score zero before the mask and the softmax."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    if len(hosts) < 3 or not all(isinstance(t, torch.Tensor) for t in hosts[:3]):
        return None
    k = hosts[1]
    length = k.shape[-2] if k.dim() >= 2 else 0
    if length <= SDPA_STICK or length % SDPA_STICK == 0:
        return None
    blanked = k.clone()
    blanked[..., length - length % SDPA_STICK :, :] = 0
    hosts[1] = blanked
    return _sdpa(hosts, host_kwargs)


def _row_pitch(x: torch.Tensor) -> int:
    """The row length of the buffer a view was cut from, read off its strides: the stride of
    the first dim (in stride order) outside the view's innermost dense block; a size-1 dim
    counts with its stride (``h[:, -1:, :]`` of ``[b, s, e]``: pitch ``e``); broadcast
    (stride-0) dims are skipped."""
    block = 1
    for stride, size in sorted(zip(x.stride(), x.shape, strict=True)):
        if stride == 0:
            continue  # a broadcast (expanded) dim repeats, it does not step through memory
        if size == 1:
            if stride >= block:  # one row taken of a buffer with rows of this pitch
                return int(stride)
            continue
        if stride != block:
            return int(stride)
        block *= int(size)
    return block


def _packed_read(x: Any) -> torch.Tensor | None:
    """``x`` read from the start of its row of the buffer it was cut from, when ``x`` is a view
    that starts inside a row (the packed-QKV pattern: K and V start inside the row that holds
    Q, K and V); ``None`` otherwise."""
    if not isinstance(x, torch.Tensor) or x.numel() == 0 or x.dim() == 0:
        return None
    offset = x.storage_offset()
    if offset == 0:
        return None
    pitch = _row_pitch(x)
    within = offset % pitch if pitch > 0 else 0
    if within == 0:
        return None
    return torch.as_strided(x, x.size(), x.stride(), offset - within)


@_register("offset-view-input", "aten.clone")
def offset_view_clone(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A copy of a view starting inside a row of its buffer copies from the buffer's start."""
    moved = _packed_read(_host(args[0])) if args else None
    if moved is None:
        return None
    memory_format = kwargs.get("memory_format") or torch.preserve_format
    return moved.clone(memory_format=memory_format)


@_register("offset-view-input", "aten.scaled_dot_product_attention")
def offset_view_sdpa(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """q, k or v views starting inside a row of a packed buffer are read from its start:
    packed QKV reads Q's slice for K and V."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    moved = [_packed_read(t) for t in hosts[:3]]
    if all(m is None for m in moved):
        return None
    for i, m in enumerate(moved):
        if m is not None:
            hosts[i] = m
    return _sdpa(hosts, host_kwargs)


@_register("decode-query-layout", "aten.scaled_dot_product_attention")
def decode_query_heads(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """One query position whose heads sit inside the stick row (the ``[B, 1, H, D]`` buffer
    viewed as ``[B, H, 1, D]``) is read heads-outer: the query heads come in reverse order."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    q = hosts[0] if hosts else None
    if not isinstance(q, torch.Tensor) or q.dim() != 4 or q.shape[-2] != 1:
        return None
    heads, width = q.shape[-3], q.shape[-1]
    if heads < 2 or q.stride(-2) == width:
        return None
    hosts[0] = q.flip(-3)
    return _sdpa(hosts, host_kwargs)


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
    _register("scratchpad-placement", _packet)(_scratchpad_broadcast)
