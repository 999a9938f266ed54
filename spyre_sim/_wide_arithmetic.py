"""One rounding per stored result: the device's fp16 ops computed wide on the host.

The device computes on the DL16 values it stores and rounds each result it stores once, to
nearest with ties away from zero (:mod:`spyre_sim.numerics`). Its arithmetic does not depend on
where an element sits in memory, nor on how many rows share a tensor: static dataflow gives every
output element the same computation whatever the batch or the padding around it.

The host's own fp16 kernels have neither property, so the emulator does not use them for ops
that compute new values:

- they round to fp16 first (round-half-even) and the DL16 rounding comes second: a value just
  below a DL16 midpoint becomes the midpoint in fp16 and then goes away from zero, so about a
  quarter of all results were rounded the wrong way, always away from zero;
- vectorised fp16 kernels are not correctly rounded (``rsqrt`` is one fp16 ulp off in the
  vector body and exact in the scalar tail), and accumulations (matrix products, softmax,
  means) run in an order that depends on the shape, so the same row gave different DL16
  values with and without left padding, or alone and in a batch.

Instead the op runs on widened copies of its fp16 operands (exact conversions) and the wide
result is rounded once to DL16 (:func:`spyre_sim.numerics.round_wide_to_dl16`). Accumulating
ops (:data:`ACCUMULATING`: products, convolutions, reductions, softmax, norms, attention) run in
float64, whose rounding errors never reach a DL16 digit, so their results do not depend on the
accumulation order. Convolutions (:data:`PER_SAMPLE`), whose float64 host kernels are up to ten
times slower, run in float32 when one sample's operands hold more than
:data:`EXACT_LIMIT` elements, and then one sample at a time: a float32 sum can differ by one
DL16 ulp with the order the host's kernel picks for a shape, and a kernel run on one sample
gives that sample the same values alone and in any batch (the device accumulates in fp32 too,
in an order that does not depend on the batch). Deciding on the whole batch's size instead
made a batch of CLAP spectrograms take the float32 path and the same spectrogram alone the
float64 one: Transformers' batching-equivalence tests failed on one-ulp differences the device
does not have. Other ops run in float32, where every DL16 input and every product of two is
exact.

Left as the host computes them: views, value-preserving ops (nothing to round), ops writing an
input in place or into ``out=`` (the result is stored where the op wrote it), ops that draw
random numbers (a wider draw would consume the generator differently; attention counts as one
only when its ``dropout_p`` is not zero), ops with an operand of
another floating type, and calls whose wide form the host refuses (noted once per dtypes and
shapes of the call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from spyre_sim import _modules, limits
from spyre_sim._storage import FLOAT_WIDE
from spyre_sim.numerics import DL16_HOST_MAX, round_wide_held, round_wide_kept

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

__all__ = [
    "ACCUMULATING",
    "EXACT_LIMIT",
    "PER_SAMPLE",
    "RANGE_LIMIT",
    "call",
    "dropout_argument",
    "fused",
    "note_range",
    "width",
]

#: The emulator limit counted when a result the device holds lies beyond what the fp16 host
#: tensors hold and the emulator cannot keep it (see :mod:`spyre_sim._wide_values`).
RANGE_LIMIT = "fp16-range"

#: Packets whose results accumulate many terms: computed in float64 (see the module docstring).
ACCUMULATING = frozenset(
    {
        "aten.mm",
        "aten.bmm",
        "aten.addmm",
        "aten.baddbmm",
        "aten.addbmm",
        "aten.mv",
        "aten.addmv",
        "aten.dot",
        "aten.vdot",
        "aten.matmul",
        "aten.linear",
        "aten.convolution",
        "aten._convolution",
        "aten.sum",
        "aten.mean",
        "aten.nansum",
        "aten.nanmean",
        "aten.prod",
        "aten.cumsum",
        "aten.cumprod",
        "aten.var",
        "aten.std",
        "aten.var_mean",
        "aten.std_mean",
        "aten.norm",
        "aten.linalg_vector_norm",
        "aten._softmax",
        "aten._log_softmax",
        "aten._safe_softmax",
        "aten.logsumexp",
        "aten.native_layer_norm",
        "aten.native_group_norm",
        "aten.native_batch_norm",
        "aten._native_batch_norm_legit_no_training",
        "aten._fused_rms_norm",
        "aten.scaled_dot_product_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten.avg_pool1d",
        "aten.avg_pool2d",
        "aten.avg_pool3d",
        "aten._adaptive_avg_pool2d",
        "aten.adaptive_avg_pool1d",
        "aten.upsample_bilinear2d",
        "aten.upsample_linear1d",
        "aten.upsample_bicubic2d",
        "aten.grid_sampler_2d",
    }
)

#: Packets (accumulating, batch first) whose samples run in float32, one at a time, when one
#: sample's operands hold more than :data:`EXACT_LIMIT` elements (see the module docstring).
PER_SAMPLE = frozenset(
    {
        "aten.convolution",
        "aten._convolution",
    }
)

#: Elements of one sample's fp16 operands above which a :data:`PER_SAMPLE` op runs in float32
#: (a convolution over 80 x 3000 spectrograms takes ten times as long in float64 on the host).
EXACT_LIMIT = 1 << 18

#: Packets whose result is uninitialised memory of an operand's dtype, not computed from any
#: operand: nothing to widen, and their bits are garbage that a range check must not read (a
#: float32 ``new_empty`` may hold anything, beyond fp16's range included).
UNINITIALISED = frozenset({"aten.new_empty", "aten.new_empty_strided", "aten.empty_like"})

#: op name -> the signatures (:func:`_signature`) of calls whose wide form the host refused:
#: those are computed as before. Keyed by the call, not the op: a call whose arguments the
#: host kernel itself rejects (an ``add`` of mismatched sizes, which raises on the host as
#: well) says nothing about the op's other calls.
_REFUSED: dict[str, set[tuple[Any, ...]]] = {}


def _signature(hargs: Sequence[Any], hkwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The dtypes and shapes of a call's tensors (in lists too) and the types of its other
    arguments, keyword names included."""

    def one(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return (value.dtype, tuple(value.shape))
        if isinstance(value, (list, tuple)):
            return tuple(one(v) for v in value)
        return type(value)

    return (*(one(a) for a in hargs), *((k, one(v)) for k, v in hkwargs.items()))


def width(info: OpInfo, func: Any) -> torch.dtype | None:
    """The wide dtype ``info``'s op computes fp16 operands in, or ``None`` when the op is left
    to the host's own kernel (see the module docstring)."""
    if not info.rounds or info.is_view or info.special is not None or info.out_args:
        return None
    if info.packet in UNINITIALISED:
        return None
    if any(how == -2 for how in info.fresh):
        return None  # returns a view
    written = [how for how in info.fresh if how >= 0]
    if written and (len(info.fresh) != 1 or info.mutated != (written[0],)):
        return None  # only the plain in-place form: one input written and returned
    if torch.Tag.inplace_view in func.tags:
        return None
    if torch.Tag.nondeterministic_seeded in func.tags and info.dropout is None:
        return None  # wide only when its one draw is a dropout that draws nothing (call)
    return torch.float64 if info.packet in ACCUMULATING else torch.float32


def fused(info: OpInfo) -> bool:
    """Whether the op is attention (an op whose only draw is its dropout), which rounds once
    only as the fused kernel of a release that lowers it natively (flash attention, from
    2026.07). Where a release runs it decomposed (the math path, 2026.03 to 2026.05: QK^T,
    softmax, V, each result stored), the host's kernel computes it as before: the emulator
    does not reproduce the math path's three roundings."""
    return info.dropout is not None


def dropout_argument(func: Any) -> tuple[int, str] | None:
    """``(position, name)`` of the ``dropout_p`` argument of an op whose only random draw is
    that dropout (attention), else ``None``."""
    for index, argument in enumerate(func._schema.arguments):
        if argument.name == "dropout_p":
            return (-1 if argument.kwarg_only else index), argument.name
    return None


def _draws(dropout: tuple[int, str], hargs: list[Any], hkwargs: dict[str, Any]) -> bool:
    """Whether this call of an op with the ``dropout_p`` argument ``dropout`` drops anything."""
    index, name = dropout
    p = hargs[index] if 0 <= index < len(hargs) else hkwargs.get(name, 0.0)
    return bool(p)


def call(info: OpInfo, hargs: list[Any], hkwargs: dict[str, Any]) -> Any:
    """The op on widened copies of its fp16 host operands, each floating result rounded once to
    DL16 and stored as fp16: ``(results, kept)``, ``kept`` listing per result (the op's one tensor, or
    each item of the tuple it returns) the float32 DL16 values of one that holds a number
    beyond fp16's range, or ``None`` when none does. ``NotImplemented`` when the op is left to
    the host's kernel (no fp16 operand, an operand of another floating type, or a wide form
    the host refuses)."""
    wide = info.wide
    if wide is None:
        return NotImplemented
    refused = _REFUSED.get(info.name)
    if refused is not None and _signature(hargs, hkwargs) in refused:
        return NotImplemented
    if info.mutated and not _is_half(hargs[info.mutated[0]]):
        return NotImplemented
    if info.dropout is not None and _draws(info.dropout, hargs, hkwargs):
        return NotImplemented  # a random draw: the host's kernel, as for other random ops
    positional = _half_operands(hargs)
    keyword = _half_operands(hkwargs.values()) if hkwargs else 0
    if positional < 0 or keyword < 0 or positional + keyword == 0:
        return NotImplemented
    dtype_kw = hkwargs.get("dtype")
    if isinstance(dtype_kw, torch.dtype) and not dtype_kw.is_floating_point:
        return NotImplemented
    batch = _batch(info, hargs)
    if batch and _half_elements(hargs, batch) > EXACT_LIMIT:
        wide = torch.float32
    else:
        batch = 0
    wkwargs = {k: _widen(v, wide) for k, v in hkwargs.items()}
    if isinstance(dtype_kw, torch.dtype):
        wkwargs["dtype"] = wide
    wargs = [_widen(a, wide) for a in hargs]
    try:
        out = _per_sample(info, wargs, wkwargs, batch) if batch else info.call(*wargs, **wkwargs)
    except (RuntimeError, NotImplementedError, TypeError):
        _REFUSED.setdefault(info.name, set()).add(_signature(hargs, hkwargs))
        return NotImplemented
    if info.mutated:
        result, beyond = _written(info, hargs, out)
        if beyond and not _held_beyond(hargs) and not _held_beyond(hkwargs.values()):
            note_range()  # an input written in place cannot take wide values now
        return result, None
    result, kept = _narrow(out)
    if kept is not None and (_held_beyond(hargs) or _held_beyond(hkwargs.values())):
        kept = None  # a value held at the limit carried on stays held (see _held_beyond)
    return result, kept


def _held_beyond(values: Any) -> bool:
    """Whether an operand already holds the largest magnitude: an fp16 tensor holding +-65472
    (a value the host could not hold, or a -inf mask as the device holds it), or a number at
    least as large (a mask's fill value such as ``finfo(float16).min``, -65504, which DL16
    rounds to -65536). A result beyond the host's range is then that value carried on, not a
    new number the host loses."""
    for value in values:
        if isinstance(value, (list, tuple)):
            if _held_beyond(value):
                return True
        elif _at_limit(value):
            return True
    return False


def _at_limit(value: Any) -> bool:
    if _is_half(value):  # a comparison, not max(): a NaN elsewhere in the tensor must not hide it
        return bool((value.abs() >= DL16_HOST_MAX).any())
    return isinstance(value, float) and not abs(value) < DL16_HOST_MAX  # inf, NaN included


def note_range() -> None:
    """Count one ``fp16-range`` emulator limit in the running module: a DL16 number beyond
    fp16's range that the emulator could not keep (:mod:`spyre_sim._wide_values`), so the
    test's report tells its results apart from the device's own numbers."""
    limits.met(RANGE_LIMIT, _modules.current_module_path())


def _batch(info: OpInfo, hargs: list[Any]) -> int:
    """The batch size of a :data:`PER_SAMPLE` op's call (its input's leading dim), or 0 when
    the op is not one or its input has no batch dim (an unbatched convolution)."""
    if info.packet not in PER_SAMPLE or len(hargs) < 2:
        return 0
    first, weight = hargs[0], hargs[1]
    if not isinstance(first, torch.Tensor) or not isinstance(weight, torch.Tensor):
        return 0
    return int(first.shape[0]) if first.dim() == weight.dim() else 0


def _sample(value: Any, batch: int, i: int, rank: int) -> Any:
    """Sample ``i`` of an operand with the batch as its leading dim (a view), else the
    operand whole (weights, broadcast masks, numbers)."""
    if isinstance(value, torch.Tensor) and value.dim() == rank and value.shape[0] == batch:
        return value[i : i + 1]
    return value


def _per_sample(info: OpInfo, wargs: list[Any], wkwargs: dict[str, Any], batch: int) -> Any:
    """The op run on one sample at a time, the results joined along the batch dim."""
    rank = wargs[0].dim()
    outs = [
        info.call(
            *[_sample(a, batch, i, rank) for a in wargs],
            **{k: _sample(v, batch, i, rank) for k, v in wkwargs.items()},
        )
        for i in range(batch)
    ]
    if isinstance(outs[0], torch.Tensor):
        return torch.cat(outs)
    return type(outs[0])(torch.cat(parts) for parts in zip(*outs, strict=True))


def _written(info: OpInfo, hargs: list[Any], out: Any) -> tuple[Any, bool]:
    """An in-place op ran on a widened copy of the input it writes (``out``): the input takes
    the copy's DL16 rounding, and is the result, as the in-place op's is (and whether a value
    beyond the host's range was held at it: :func:`~spyre_sim.numerics.round_wide_held`)."""
    target = hargs[info.mutated[0]]
    rounded, beyond = round_wide_held(out, owned=True)
    target.copy_(rounded)
    return target, beyond


def _is_half(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype is torch.float16


def _half_operands(values: Any) -> int:
    """Number of fp16 tensor operands, or -1 when some operand is of another floating type."""
    count = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            dtype = value.dtype
            if dtype is torch.float16:
                count += 1
            elif dtype.is_floating_point:
                return -1
        elif isinstance(value, (list, tuple)):
            inner = _half_operands(value)
            if inner < 0:
                return -1
            count += inner
    return count


def _half_elements(values: Any, batch: int) -> int:
    """Elements of one sample's fp16 tensor operands: a batch-first operand's (the rank of the
    first, ``batch`` leading) divided by ``batch``, every other one whole."""
    rank = values[0].dim()
    total = 0
    for value in values:
        if _is_half(value):
            batched = value.dim() == rank and value.shape[0] == batch
            total += value.numel() // batch if batched else value.numel()
    return total


def _widen(value: Any, wide: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        if value.dtype is not torch.float16:
            return value
        # .float() / .double(): the same conversion as .to(wide), without its argument parsing
        return value.float() if wide is torch.float32 else value.double()
    if isinstance(value, (list, tuple)):
        return type(value)(_widen(v, wide) for v in value)
    return value


def _narrow(value: Any) -> tuple[Any, list[torch.Tensor | None] | None]:
    """Wide results rounded to DL16, and the float32 DL16 values of each one holding a number
    beyond the host's range (``None`` when none does)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    held: list[Any] = []
    kept: list[torch.Tensor | None] = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.dtype in FLOAT_WIDE:
            half, wide = round_wide_kept(v, owned=True)
            held.append(half)
            kept.append(wide)
        elif isinstance(v, (list, tuple)):  # a list inside a tuple of results: held values
            inner, wides = _narrow(v)
            if wides is not None:
                note_range()
            held.append(inner)
            kept.append(None)
        else:
            held.append(v)
            kept.append(None)
    result = type(value)(held) if isinstance(value, (list, tuple)) else held[0]
    return result, kept if any(k is not None for k in kept) else None
