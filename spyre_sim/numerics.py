"""DL16 numerics of the emulated device.

The device stores float16 tensors as **DL16** (DLFloat16): 1 sign bit, 6 exponent bits with
bias 31, 9 fraction bits, no subnormals, no infinity. This module holds the format, an exact
encoder/decoder (used by tests and docs), and the fast rounding the device applies to fp16
host tensors wherever it would store a value.

Format decisions (each a documented choice; the evidence only fixes the field widths):

- exponent code 0 with fraction 0 is zero; exponent code 0 is otherwise unused (no
  subnormals), so the smallest normal is ``2**-30`` (bits ``0x0200``);
- the all-ones pattern (``0x7FFF``/``0xFFFF``) is the single NaN; the largest finite value is
  ``(2 - 2**-8) * 2**32 = 8_573_157_376`` (bits ``0x7FFE``), "about 8.6e9";
- finite values beyond it saturate to it; **infinities** become ``0x6FFF``/``0xEFFF``
  (``(2 - 2**-9) * 2**24 = 33_521_664``, "about 3.35e7", as reported for ``-inf``, docs/STACK.md §2):
  a conversion rule of its own, *not* the saturation value;
- rounding is round-to-nearest with ties :data:`TIE_RULE` (``"away-from-zero"``, the
  "round-nearest-up" of the DLFloat paper's simplified rounding).

Emulation on a float16 host tensor (the host tensor stays fp16): values are restricted to the
DL16-representable fp16 values. Every fp16 normal with an odd last fraction bit is exactly a
tie between two DL16 neighbours and goes away from zero; fp16 subnormals have at most 10
significant bits and are all DL16 normals, so they are kept. DL16 reaches far beyond the fp16
range, which the host cannot hold: every DL16 value above 65504 in magnitude (a saturated
result, an infinity's 3.35e7, 65504 itself, which rounds up to 65536) is **held as +-65472**
(``0x7BFE``), the largest DL16 value fp16 can represent. So a ``-inf`` attention mask becomes
the finite -65472 on the device, as it becomes a finite -3.35e7 on the real card (gap
``no-inf``): a fully masked row softmaxes to uniform instead of NaN. NaN computed on the device
stays NaN; a NaN *entering* the device (a transfer, or a fallback's result) reads back as
``-inf`` (:func:`nan_enters_`, gap ``nan-entry``).

Each stored result is rounded **once**: a float32 source (a transfer of fp32 weights, or an op
the device computes, which :mod:`spyre_sim._wide_arithmetic` runs on widened operands) goes
to DL16 by :func:`round_wide_to_dl16`, never through fp16's own rounding first; an fp16 value
(an fp16 transfer, a cpu-fallback's fp16 result) by :func:`round_to_dl16_`.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import torch

_np: ModuleType | None
try:
    import numpy as _np
except ImportError:  # pragma: no cover - NumPy ships with Transformers
    _np = None

__all__ = [
    "DL16_BIAS",
    "DL16_EXPONENT_BITS",
    "DL16_FRACTION_BITS",
    "DL16_HOST_MAX",
    "DL16_INF_BITS",
    "DL16_MAX",
    "DL16_MAX_BITS",
    "DL16_MIN_NORMAL",
    "DL16_NAN_BITS",
    "FP16_MIN_NORMAL",
    "TIE_RULE",
    "beyond_host",
    "dl16_decode",
    "dl16_encode",
    "dl16_host_value",
    "dl16_step",
    "nan_enters_",
    "round_to_dl16",
    "round_to_dl16_",
    "round_wide_held",
    "round_wide_in_range",
    "round_wide_kept",
    "round_wide_to_dl16",
    "tiny_unheld",
]

DL16_EXPONENT_BITS = 6
DL16_FRACTION_BITS = 9
DL16_BIAS = 31
TIE_RULE = "away-from-zero"
"""The single tie rule of the device's round-to-nearest: a tie goes to the larger magnitude."""

DL16_NAN_BITS = 0x7FFF
DL16_MAX_BITS = 0x7FFE
DL16_INF_BITS = 0x6FFF
"""Bits (without sign) that an infinity converts to: 33,521,664. ``-inf`` is ``0xEFFF``."""
DL16_MAX = (2.0 - 2.0**-8) * 2.0**32
DL16_MIN_NORMAL = 2.0**-30
DL16_HOST_MAX = 65472.0
"""Largest DL16 value a float16 host tensor can hold; larger DL16 magnitudes are held as it."""
FP16_MIN_NORMAL = 2.0**-14
"""fp16's smallest normal: below it fp16 holds DL16 numbers only as its subnormals."""

_FRAC_ONE = 1 << DL16_FRACTION_BITS
_MAX_EXP_CODE = (1 << DL16_EXPONENT_BITS) - 1


def _encode_one(x: float) -> int:
    if math.isnan(x):
        return DL16_NAN_BITS
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if math.isinf(a):
        return sign | DL16_INF_BITS
    if a == 0.0:
        return sign
    mant, exp = math.frexp(a)  # a = mant * 2**exp, mant in [0.5, 1)
    e = exp - 1  # a = (2*mant) * 2**e, 2*mant in [1, 2)
    scaled = (2.0 * mant - 1.0) * _FRAC_ONE  # fraction in units of 2**-9, exact in float64
    frac = math.floor(scaled)
    if scaled - frac >= 0.5:  # ties away from zero
        frac += 1
    if frac == _FRAC_ONE:
        frac = 0
        e += 1
    code = e + DL16_BIAS
    if code <= 0:
        # Below the smallest normal: round to zero or to 2**-30 (no subnormals).
        return sign | (0x0200 if a >= DL16_MIN_NORMAL / 2 else 0)
    if code > _MAX_EXP_CODE or (code == _MAX_EXP_CODE and frac > 0x1FE):
        return sign | DL16_MAX_BITS  # saturate
    return sign | (code << DL16_FRACTION_BITS) | frac


def dl16_encode(values: torch.Tensor) -> torch.Tensor:
    """Exact DL16 bit patterns (``int32`` in ``[0, 0xFFFF]``) of any float tensor's values."""
    flat = values.detach().to("cpu", torch.float64).reshape(-1).tolist()
    bits = [_encode_one(float(v)) for v in flat]
    return torch.tensor(bits, dtype=torch.int32).reshape(values.shape)


def _decode_one(bits: int) -> float:
    sign = -1.0 if bits & 0x8000 else 1.0
    mag = bits & 0x7FFF
    if mag == DL16_NAN_BITS:
        return math.nan
    code = mag >> DL16_FRACTION_BITS
    frac = mag & (_FRAC_ONE - 1)
    if code == 0:
        return sign * 0.0
    return sign * (1.0 + frac / _FRAC_ONE) * 2.0 ** (code - DL16_BIAS)


def dl16_decode(bits: torch.Tensor) -> torch.Tensor:
    """Values (``float64``) of DL16 bit patterns given as an integer tensor."""
    flat = [int(b) & 0xFFFF for b in bits.reshape(-1).tolist()]
    return torch.tensor([_decode_one(b) for b in flat], dtype=torch.float64).reshape(bits.shape)


def round_to_dl16_(values: torch.Tensor) -> torch.Tensor:
    """Round a float16 CPU tensor to the DL16-representable set **in place**; returns it.

    On the bits (sign-magnitude), DL16 rounding of a finite fp16 normal adds one to the
    magnitude when its last fraction bit is odd (an odd pattern is exactly a tie between two
    DL16 neighbours, and ties go away from zero; a carry into the exponent is correct). Zero
    and the fp16 subnormals (all DL16-representable) are left alone, and so are inf and NaN.
    Magnitudes of 65504 or more become +-65472 (65504 rounds to 65536 and inf converts to
    3.35e7, neither of which fp16 can hold; NaN stays NaN).

    The integer steps run on a NumPy view of the same memory: a NumPy ufunc call costs far
    less than a PyTorch op call on the small tensors a model produces, and gives the same bits
    (checked exhaustively by the tests). Without NumPy, PyTorch ops do the same.

    Every extra pass over a fresh result costs about as much as the op that made it, so the
    common case takes five: ``t = bits & 0x7C01`` keeps the exponent field ``E`` and the last
    bit ``b``; if ``t`` shows no ``E == 31`` and no odd ``E == 30`` (the only values that can
    reach 65504 or beyond), ``(t * 0x7C01) mod 2**16`` has its top bit set exactly when
    ``b == 1`` and ``E >= 1`` (``E * 0x400 * 0x7C01`` is ``E << 10`` modulo ``2**16``, and
    ``(E << 10) + 0x7C01`` passes ``0x8000`` only for ``E >= 1``), which is the one to add.
    Otherwise :func:`_round_saturating_` handles the range as well.

    A tensor of at most :data:`_TABLE_MAX` elements (most of a small model's results) is
    rounded by one table lookup instead: the table holds this very computation's result for
    each of the 65,536 fp16 patterns, and one ``take`` costs a third of the five passes on
    small tensors (5 against 15 us for 448 elements), but more beyond some 4,000 elements.
    """
    if _np is None or values.numel() == 0:
        return _round_torch_(values)
    array = values.numpy()
    if array.ndim == 0:  # NumPy turns 0-d results into scalars; keep an array view instead
        array = array.reshape(1)
    bits = array.view(_np.uint16)
    if array.size <= _TABLE_MAX:
        _table().take(bits, out=bits, mode="wrap")  # every index is in range: no check needed
        return values
    step = bits & 0x7C01
    if step.max() >= 0x7801:  # an odd pattern at E == 30 (65504 among them), inf or NaN
        return _round_saturating_(values, array)
    step *= 0x7C01
    step >>= 15
    bits += step
    return values


#: the largest tensor (in elements) rounded through :func:`_table` (the measured crossover)
_TABLE_MAX = 4096
_TABLE: list[Any] = []


def _table() -> Any:
    """The rounded pattern (``uint16``) of each fp16 bit pattern, indexed by the pattern:
    :func:`round_to_dl16_`'s arithmetic applied to all 65,536 of them, once per process
    (index i held pattern i, and now holds its rounding)."""
    if not _TABLE:
        every = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16)
        round_to_dl16_(every)  # more than _TABLE_MAX elements: the arithmetic passes
        _TABLE.append(every.numpy().view(_np.uint16))  # type: ignore[union-attr]
    return _TABLE[0]


def _round_saturating_(values: torch.Tensor, array: Any) -> torch.Tensor:
    """:func:`round_to_dl16_` for tensors holding magnitudes near or beyond fp16's range."""
    bits = array.view(_np.int16)  # type: ignore[union-attr]
    magnitude = bits & 0x7FFF
    if magnitude.max() >= 0x7BFF:  # 65504, inf or NaN present
        values.clamp_(-DL16_HOST_MAX, DL16_HOST_MAX)
        _np.bitwise_and(bits, 0x7FFF, out=magnitude)  # type: ignore[union-attr]
    magnitude -= 0x400  # finite normals: 0x400..0x7BFF -> 0..0x77FF; others wrap above
    normal = magnitude.view(_np.uint16) < 0x7800  # type: ignore[union-attr]
    _np.bitwise_and(bits, normal, out=magnitude)  # type: ignore[union-attr]
    bits += magnitude
    return values


def _round_torch_(values: torch.Tensor) -> torch.Tensor:
    bits = values.view(torch.int16)
    v = torch.bitwise_and(bits, 0x7C00)
    v.add_(0x400)  # exponent 31 wraps negative
    v.gt_(0x400)  # 1 for finite normals
    bits.add_(v)
    bits.bitwise_and_(v.bitwise_not_())
    values.clamp_(-DL16_HOST_MAX, DL16_HOST_MAX)
    return values


def round_wide_to_dl16(values: torch.Tensor, owned: bool = False) -> torch.Tensor:
    """A float16 tensor holding the DL16 rounding of a float32 or float64 tensor's values,
    rounded **once** (to nearest, ties away from zero), not through fp16's own rounding first.
    ``owned``: a float32 ``values`` is the caller's scratch and may be changed.

    (Rounding to fp16 first and then to DL16 is wrong for a quarter of all values: one just
    below a DL16 midpoint becomes that midpoint in fp16, which then goes away from zero.) On the
    float32 bits, adding half a DL16 ulp (``0x2000``: fp32 keeps 14 more fraction bits) to the
    magnitude and clearing the 14 low bits rounds to nearest with ties away, a carry into the
    exponent included; the result has at most 10 significant bits and converts to fp16 exactly
    wherever fp16 has normals. Magnitudes are first limited to :data:`DL16_HOST_MAX` (what the
    host holds for every DL16 value beyond fp16's range, infinities included); NaN stays NaN,
    whatever its payload (:data:`_QUIET_NAN`). A float64 value goes through float32 first,
    which changes its DL16 rounding only when it lies within 2**-24 of a DL16 midpoint without
    being on it. Below fp16's normals the DL16
    value is held as fp16's conversion gives it (the host cannot hold DL16's smaller normals).
    """
    return round_wide_held(values, owned)[0]


#: The NaN a wide result's NaNs are rewritten to before rounding (0x7FC00000: no payload). The
#: rounding adds to the bits: a NaN with a full payload, such as the 0x7FFFFFFF PyTorch's
#: half-to-float conversion gives for fp16's NaN on some CPUs, would carry into the sign bit
#: and come out as -0 (or, from a signalling NaN, as infinity).
_QUIET_NAN = float("nan")


def round_wide_held(values: torch.Tensor, owned: bool = False) -> tuple[torch.Tensor, bool]:
    """:func:`round_wide_to_dl16`, and whether a DL16 number beyond :data:`DL16_HOST_MAX` was
    held as +-65472: a number DL16 keeps (up to about 8.6e9) that the fp16 host tensors cannot
    (an infinity is not one: both hold it as a large finite value)."""
    held, kept = round_wide_kept(values, owned)
    return held, kept is not None


def round_wide_kept(
    values: torch.Tensor, owned: bool = False, tiny: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`round_wide_to_dl16`, and, when some rounded value lies beyond
    :data:`DL16_HOST_MAX` (or, with ``tiny``, when some nonzero DL16 value below fp16's
    normals is not held exactly by fp16's subnormals), the DL16 values themselves in float32
    (:func:`round_wide_in_range`), else ``None``. The fp16 result holds those values as
    +-65472 (or fp16's nearest subnormal); the float32 one is what the device holds
    (:mod:`spyre_sim._wide_values` keeps it beside the fp16 host tensor)."""
    if not values.is_contiguous():
        wide = values.to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    elif values.dtype is not torch.float32:
        wide = values.float()  # a fresh contiguous tensor (the fast form of .to(float32))
    elif not owned:
        wide = values.clone()
    else:
        wide = values
    kept = None
    if _np is None or wide.numel() == 0:
        if wide.numel():
            finite = wide[torch.isfinite(wide)]
            if finite.numel() and finite.abs().max() > DL16_HOST_MAX:
                kept = round_wide_in_range(wide)
        wide.clamp_(-DL16_HOST_MAX, DL16_HOST_MAX)
        wide[torch.isnan(wide)] = _QUIET_NAN
        bits32 = wide.view(torch.int32)
        bits32.add_(0x2000)
        bits32.bitwise_and_(-0x4000)
    else:
        array = wide.numpy()
        if array.ndim == 0:
            array = array.reshape(1)
        # two reductions instead of a clamp where nothing is beyond the limit (most results)
        if not (array.max() <= DL16_HOST_MAX and array.min() >= -DL16_HOST_MAX):  # NaN: here
            finite = array[_np.isfinite(array)]
            if finite.size and _np.abs(finite).max() > DL16_HOST_MAX:
                kept = round_wide_in_range(wide)
            wide.clamp_(-DL16_HOST_MAX, DL16_HOST_MAX)
            array[_np.isnan(array)] = _QUIET_NAN
        bits = array.view(_np.uint32)
        bits += 0x2000
        bits &= 0xFFFFC000
    if kept is not None and not beyond_host(kept):
        kept = None  # every value beyond the limit rounds down to it (65490 -> 65472)
    if kept is None and tiny and bool(((wide != 0) & (wide.abs() < FP16_MIN_NORMAL)).any()):
        in_range = round_wide_in_range(wide)  # wide is rounded: only the flush may change it
        if tiny_unheld(in_range):
            kept = in_range
    return wide.half(), kept


def beyond_host(values: torch.Tensor) -> bool:
    """Whether DL16 values (float32) hold a magnitude beyond :data:`DL16_HOST_MAX`, which the
    fp16 host tensors hold as +-65472."""
    return bool((values.abs() > DL16_HOST_MAX).any())


def tiny_unheld(values: torch.Tensor) -> bool:
    """Whether DL16 values (float32) hold a nonzero magnitude below fp16's normals that fp16's
    subnormals do not hold exactly."""
    magnitude = values.abs()
    tiny = (magnitude < FP16_MIN_NORMAL) & (magnitude != 0)
    return bool(tiny.any()) and not torch.equal(values[tiny], values[tiny].half().float())


def round_wide_in_range(values: torch.Tensor) -> torch.Tensor:
    """A new contiguous float32 tensor holding the DL16 rounding of ``values`` (float32 or
    float64) with DL16's own range: finite magnitudes beyond :data:`DL16_MAX` saturate to it,
    infinities are held as +-65472 as in the fp16 host tensors (the device holds 3.35e7;
    the emulator keeps one stand-in for them everywhere), NaN stays NaN, and magnitudes below
    DL16's smallest normal (2**-30) are zero: DL16 has no subnormals."""
    kept = values.to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    infinite = torch.isinf(kept)
    kept.clamp_(-DL16_MAX, DL16_MAX)  # NaN stays NaN
    if bool(infinite.any()):
        kept = torch.where(infinite, kept.sign() * DL16_HOST_MAX, kept)
    kept[torch.isnan(kept)] = _QUIET_NAN
    bits = kept.view(torch.int32)
    bits.add_(0x2000)
    bits.bitwise_and_(-0x4000)
    kept.masked_fill_(kept.abs() < DL16_MIN_NORMAL, 0.0)
    return kept


def round_to_dl16(values: torch.Tensor) -> torch.Tensor:
    """A new float16 tensor holding the DL16 rounding of a float16 tensor's values. Any other
    dtype raises ``TypeError`` (its bits are not fp16's: rounding them as fp16 patterns would
    give garbage): :func:`round_wide_to_dl16` rounds float32 and float64 values once."""
    if values.dtype != torch.float16:
        raise TypeError(
            f"round_to_dl16 rounds float16 tensors, not {values.dtype}: use "
            "round_wide_to_dl16 for float32/float64 values (rounded once, as the device "
            "stores them), or convert with .half() first"
        )
    return round_to_dl16_(values.clone())


def dl16_host_value(values: torch.Tensor) -> torch.Tensor:
    """Reference (slow, exact) of what the device holds for float16 values: DL16 encode, then
    decode, then hold magnitudes above fp16's range as +-65472. Used by tests."""
    decoded = dl16_decode(dl16_encode(values))
    held = decoded.clamp(-DL16_HOST_MAX, DL16_HOST_MAX)
    return held.to(torch.float16)


def dl16_step(values: torch.Tensor) -> torch.Tensor:
    """The distance between a DL16 number of each value's magnitude and the next one
    (float32): ``2**(e - 9)`` for ``2**e <= |x| < 2**(e+1)``; at zero, DL16's smallest normal
    (it has no subnormals)."""
    _, exponent = torch.frexp(values.float().abs())  # |x| = m * 2**exponent, 0.5 <= m < 1
    ones = torch.ones_like(values, dtype=torch.float32)
    step = torch.ldexp(ones, exponent - 1 - DL16_FRACTION_BITS)
    return torch.where(values == 0, torch.full_like(step, DL16_MIN_NORMAL), step)


def nan_enters_(values: torch.Tensor) -> bool:
    """A NaN entering the device reads back as ``-inf`` (gap ``nan-entry``: torch-spyre #4700,
    #1829): turn the NaNs of a value just stored by a transfer (host->device copy, or a
    cpu-fallback's result) into ``-inf``, in place, after DL16 rounding (so the ``-inf`` is
    held as such, not as the saturated -65472 of a transferred ``-inf``). NaN computed on the
    device is not touched. Returns whether there was a NaN."""
    if not values.is_floating_point() or values.numel() == 0:
        return False
    nan = torch.isnan(values)
    if not bool(nan.any()):
        return False
    values.masked_fill_(nan, float("-inf"))
    return True
