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
- ``eps-underflow`` (``_flushed_bound``, ``_lost_addend``): a ``clamp``/``clamp_min`` whose
  positive lower bound is zero in the device's number format (``F.normalize``'s eps 1e-12),
  and an ``add``/``sub`` of such a number (TAPAS's ``count + 1e-10`` before a division), are
  recorded when an input value lies below the bound (or the added number); the result,
  computed with the number flushed, is kept. A number DL16 holds (2**-30 and above) that only
  the emulator's fp16 host tensors flush is kept beside them (:mod:`spyre_sim._wide_values`)
  or, where it cannot be (an in-place or ``out=`` form, ``add_``/``sub_``/``clamp_``, which has
  already written its fp16 result), counted as an emulator limit: the device keeps it.
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
  is unaffected; generated tokens after the first diverge. Not while the stack's pool planning
  is off (:data:`POOL_PLANNING`: ``HBM_POOL_PLANNING=0`` when the device is imported, the
  upstream workaround).
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

The reproductions live in one module per concept: single ops' results
(:mod:`spyre_sim._miscompiles_ops`), fp32 upcasts (:mod:`spyre_sim._miscompiles_fp32`), memory
planning (:mod:`spyre_sim._miscompiles_memory`) and attention and views
(:mod:`spyre_sim._miscompiles_attention`). Each is registered with
:func:`~spyre_sim._miscompile_registry.register` (gap id, ATen packet); a function that only
marks a result (``fp32-reduce-rows``'s upcasts) returns ``None``. A note on a result that a
later reproduction reads, set on the result's wrapper, is a :class:`Mark` (``rotate-half``'s
``neg``: :func:`neg_of_a_slice`), registered with
:func:`~spyre_sim._miscompile_registry.register_mark`. An op's reproductions are tried in
registration order, so the modules are imported in a fixed order below. Sources for each are in
``spyre_sim/data/gaps.toml``.
"""

from __future__ import annotations

# Registration order decides which reproduction of an op applies first: rotate-half before
# mem-pool (cat), pow-cube before the fp32 upcast (pow), the fp32 upcast before
# scratchpad-placement (mul, div). Each block below imports one module, in that order.
from spyre_sim._miscompiles_ops import NEAR_CONSTANT_VARIANCE as NEAR_CONSTANT_VARIANCE
from spyre_sim._miscompiles_ops import NEG_SOURCE_ATTR as NEG_SOURCE_ATTR
from spyre_sim._miscompiles_ops import generic_corruption as generic_corruption
from spyre_sim._miscompiles_ops import indexed_dim_rows as indexed_dim_rows
from spyre_sim._miscompiles_ops import layer_norm_nan as layer_norm_nan
from spyre_sim._miscompiles_ops import neg_of_a_slice as neg_of_a_slice
from spyre_sim._miscompiles_ops import pow_cube_abs4 as pow_cube_abs4
from spyre_sim._miscompiles_ops import rotate_half_concat as rotate_half_concat
from spyre_sim._miscompiles_ops import topk_largest_dropped as topk_largest_dropped

# isort: split
from spyre_sim._miscompiles_fp32 import FP32_REDUCE_ROWS as FP32_REDUCE_ROWS
from spyre_sim._miscompiles_fp32 import UPCAST_ATTR as UPCAST_ATTR
from spyre_sim._miscompiles_fp32 import fp32_upcast_tag as fp32_upcast_tag

# isort: split
from spyre_sim._miscompiles_memory import POOL_PLANNING as POOL_PLANNING
from spyre_sim._miscompiles_memory import mem_pool_cache_concat as mem_pool_cache_concat

# isort: split
from spyre_sim._miscompiles_attention import SDPA_STICK as SDPA_STICK
from spyre_sim._miscompiles_attention import decode_query_heads as decode_query_heads
from spyre_sim._miscompiles_attention import offset_view_clone as offset_view_clone
from spyre_sim._miscompiles_attention import offset_view_sdpa as offset_view_sdpa
from spyre_sim._miscompiles_attention import sdpa_partial_key_stick as sdpa_partial_key_stick
from spyre_sim._miscompiles_attention import sdpa_strided_read as sdpa_strided_read

# isort: split
from spyre_sim._miscompile_registry import Apply as Apply
from spyre_sim._miscompile_registry import Mark as Mark
from spyre_sim._miscompile_registry import MarkFn as MarkFn
from spyre_sim._miscompile_registry import Miscompile as Miscompile
from spyre_sim._miscompile_registry import marks_for as marks_for
from spyre_sim._miscompile_registry import miscompiles_for as miscompiles_for
from spyre_sim._miscompile_registry import registered as registered
from spyre_sim._miscompile_registry import registered_marks as registered_marks

__all__ = [
    "FP32_REDUCE_ROWS",
    "NEAR_CONSTANT_VARIANCE",
    "POOL_PLANNING",
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
