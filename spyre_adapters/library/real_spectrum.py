"""One-sided spectra of real signals held as two real tensors: the ``real-spectrum`` adapter
(gap ``complex``).

Autoformer's auto-correlation attention finds the periods of a series with the FFT:
``irfft(rfft(q, n, dim=1) * conj(rfft(k, n, dim=1)), n, dim=1)``, the circular
cross-correlation of queries and keys along time. The device has no complex format, so the
first ``rfft`` stops the model (gap ``complex``, lasting: this adapter is permanent) in both
faithful and functional mode.

For a real signal ``x`` of length ``n`` the one-sided spectrum is exact in real arithmetic:
with ``C[f, t] = cos(2π ft/n)`` and ``S[f, t] = sin(2π ft/n)`` (``f = 0 .. n//2``),
``rfft(x)[f] = (C x)[f] - i (S x)[f]``. Products and conjugates of spectra are products of
their real and imaginary parts, and the inverse of a one-sided spectrum ``Z`` is

    irfft(Z, n)[t] = (1/n) sum_f w_f (Re Z_f cos(2π ft/n) - Im Z_f sin(2π ft/n)),

with ``w_f = 2`` except ``w_0 = 1`` and, for even ``n``, ``w_{n/2} = 1`` (the imaginary parts of
those two bins drop out, as PyTorch's ``irfft`` ignores them, since their sine is zero).

:class:`RealSpectra` is a ``TorchFunctionMode`` that, inside the forwards it is bound to,
answers ``torch.fft.rfft`` of a real floating tensor (default ``norm``) with a
:class:`RealSpectrum` (the two real parts, from two real matmuls), which ``torch.conj``,
``*`` (with another spectrum, a real tensor or a number) and ``torch.fft.irfft`` (default
``norm``) keep real; any other use of a spectrum (``.abs()``, ``torch.angle``, an attribute)
gets the complex tensor it stands for, so it computes what the stock expression does, and on
the device stops where the stock one did. The cosine and sine matrices are built on the host
in float64 from the sizes of each call (``ft`` reduced modulo ``n`` first, so every angle is an
exact multiple of ``2π/n``), cast to the signal's dtype and moved to its device; a small cache
keeps them, never the module. Nothing the model shows changes: parameters, buffers, the state
dict, the config and every output shape are the stock ones; on the CPU the values agree with the
FFT to float32 rounding.

Matched structurally: every module whose forward (its decorator chain, or the forward another
adapter bound) names both ``rfft`` and ``irfft``. Its forward is bound, per instance, to run
that forward under :class:`RealSpectra`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions, forward_function
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["RealSpectra", "RealSpectrum", "RealSpectrumAdapter", "adapter"]

#: Matrix pairs kept per mode (sizes, dtypes and devices seen recently).
CACHE_SIZE = 16


def _angles(n: int, bins: int, samples: int) -> torch.Tensor:
    """``2π f t / n`` for ``f < bins`` (rows) and ``t < samples`` (columns), float64, host."""
    f = torch.arange(bins, dtype=torch.int64).unsqueeze(1)
    t = torch.arange(samples, dtype=torch.int64).unsqueeze(0)
    return ((f * t) % n).to(torch.float64) * (2.0 * math.pi / n)


def forward_matrices(n: int, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C, S)`` ``[n//2 + 1, samples]``, float64: the one-sided DFT of a signal cut or
    zero-padded to ``n`` (columns ``t >= n`` are zero)."""
    angle = _angles(n, n // 2 + 1, samples)
    kept = (torch.arange(samples) < n).to(torch.float64)
    return torch.cos(angle) * kept, torch.sin(angle) * kept


def inverse_matrices(n: int, bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, B)`` ``[bins, n]``, float64: ``irfft(Z, n) = Re Z @ A + Im Z @ B`` for a one-sided
    spectrum of ``bins`` bins (bins past ``n//2`` dropped, as PyTorch drops them)."""
    used = min(bins, n // 2 + 1)
    weight = torch.full((bins,), 2.0, dtype=torch.float64)
    weight[0] = 1.0
    if n % 2 == 0 and n // 2 < bins:
        weight[n // 2] = 1.0
    weight[used:] = 0.0
    angle = _angles(n, bins, n)
    scale = (weight / n).unsqueeze(1)
    return torch.cos(angle) * scale, -torch.sin(angle) * scale


def _matrices(
    kind: str, n: int, size: int, like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``kind`` ("forward" or "inverse") pair for sizes ``n`` and ``size``, in ``like``'s
    dtype on ``like``'s device, built on the host once (the ``CACHE_SIZE`` most recent kept)."""
    return _built(kind, n, size, like.dtype, like.device)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _built(
    kind: str, n: int, size: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    # ordinary tensors even when first asked for under inference_mode: a later forward with
    # gradients may save them for backward
    with torch.inference_mode(False), torch.no_grad():
        first, second = (
            forward_matrices(n, size) if kind == "forward" else inverse_matrices(n, size)
        )
        return first.to(dtype=dtype).to(device), second.to(dtype=dtype).to(device)


def _along(x: torch.Tensor, dim: int, matrix: torch.Tensor) -> torch.Tensor:
    """``x`` with its ``dim`` mapped by ``matrix`` ``[out, in]`` (a matmul along ``dim``)."""
    if dim == x.dim() - 2:
        return matrix @ x
    return (x.movedim(dim, -1) @ matrix.transpose(0, 1)).movedim(-1, dim)


class RealSpectrum:
    """A one-sided spectrum as its real and imaginary parts (real tensors of one shape), of a
    signal of length ``n`` along ``dim``."""

    def __init__(self, real: torch.Tensor, imag: torch.Tensor, n: int, dim: int) -> None:
        self.real, self.imag, self.n, self.dim = real, imag, n, dim

    def complex(self) -> torch.Tensor:
        """The complex tensor this spectrum stands for (what the stock expression holds)."""
        real, imag = self.real, self.imag
        if real.dtype not in (torch.float32, torch.float64):
            real, imag = real.float(), imag.float()
        return torch.complex(real, imag)

    def conj(self) -> RealSpectrum:
        return RealSpectrum(self.real, -self.imag, self.n, self.dim)

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, RealSpectrum):
            a, b, c, d = self.real, self.imag, other.real, other.imag
            return RealSpectrum(a * c - b * d, a * d + b * c, self.n, self.dim)
        if isinstance(other, (int, float)) or (
            isinstance(other, torch.Tensor) and not other.is_complex()
        ):
            return RealSpectrum(self.real * other, self.imag * other, self.n, self.dim)
        return self.complex() * other

    __rmul__ = __mul__

    def __getattr__(self, name: str) -> Any:
        return getattr(self.complex(), name)

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in (torch.conj, torch.Tensor.conj) and len(args) == 1 and not kwargs:
            return args[0].conj()
        if func in (torch.mul, torch.Tensor.mul, torch.Tensor.__mul__) and len(args) == 2:
            return args[0] * args[1] if isinstance(args[0], RealSpectrum) else args[1] * args[0]
        if func is torch.fft.irfft:
            out = _irfft(*args, **kwargs)
            if out is not None:
                return out
        return func(*_materialised(args), **{k: _materialised((v,))[0] for k, v in kwargs.items()})


def _materialised(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v.complex() if isinstance(v, RealSpectrum) else v for v in values)


def _irfft(
    spectrum: Any, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> torch.Tensor | None:
    if not isinstance(spectrum, RealSpectrum) or out is not None or norm not in (None, "backward"):
        return None
    real = spectrum.real
    axis = dim % real.dim()
    if axis != spectrum.dim:
        return None
    bins = real.shape[axis]
    length = 2 * (bins - 1) if n is None else n
    if length <= 0:
        return None
    a, b = _matrices("inverse", length, bins, real)
    return _along(real, axis, a.transpose(0, 1)) + _along(spectrum.imag, axis, b.transpose(0, 1))


def _rfft(
    x: Any, n: int | None = None, dim: int = -1, norm: str | None = None, *, out: Any = None
) -> RealSpectrum | None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0:
        return None
    if out is not None or norm not in (None, "backward"):
        return None
    axis = dim % x.dim()
    samples = x.shape[axis]
    length = samples if n is None else n
    if length <= 0 or samples == 0:
        return None
    cos, sin = _matrices("forward", length, samples, x)
    return RealSpectrum(_along(x, axis, cos), -_along(x, axis, sin), length, axis)


class RealSpectra(TorchFunctionMode):
    """Answers ``torch.fft.rfft`` of real tensors with a :class:`RealSpectrum` (see the module
    docstring); every other call runs unchanged."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.fft.rfft:
            spectrum = _rfft(*args, **kwargs)
            if spectrum is not None:
                return spectrum
        return func(*args, **kwargs)


def _forward_under_mode(stock: Callable[..., Any]) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with RealSpectra():
            return stock(self, *args, **kwargs)

    return forward


#: The code of every forward this adapter binds (an adapted module runs it: not matched again).
_ADAPTED_CODE = _forward_under_mode(lambda *args, **kwargs: None).__code__


class RealSpectrumAdapter(TargetedAdapter[str]):
    """``real-spectrum`` (see the module docstring)."""

    name = "real-spectrum"
    missing = "no module whose own forward takes rfft and irfft"

    def targets(self, model: nn.Module) -> list[str]:
        found = []
        for path, module in model.named_modules():
            fn = forward_function(module)
            if fn is None or fn.__code__ is _ADAPTED_CODE:
                continue
            if code_mentions(fn, "rfft") and code_mentions(fn, "irfft"):
                found.append(path)
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[str]) -> None:
        for path in targets:
            module = model.get_submodule(path)
            stock = forward_function(module)
            assert stock is not None
            edit.bind_forward(module, _forward_under_mode(stock))


adapter = RealSpectrumAdapter()
