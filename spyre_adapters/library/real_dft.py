"""FNet's Fourier token mixing as real matmuls: the ``real-dft`` adapter (gap ``complex``).

FNet replaces self-attention with a parameter-free mixing module whose forward returns
``(self.fourier_transform(hidden_states).real,)``: the real part of the 2-D discrete Fourier
transform of the hidden states ``X`` (``[batch, seq, hidden]``) over the sequence and hidden
dims, ``torch.fft.fftn(X, dim=(1, 2))`` (or, with ``use_tpu_fourier_optimizations`` and no DFT
matrices, an ``fft`` per dim, the same transform). The device has no complex format: the FFT
and every complex op never lower (gap ``complex``, lasting: this adapter is permanent), so
every FNet stops at its first mixing layer.

For real ``X`` the transform is exact in real arithmetic. With the DFT matrix
``F_n[j, k] = exp(-2πi jk/n) = C_n - i S_n``, where ``C_n[j, k] = cos(2π jk/n)`` and
``S_n[j, k] = sin(2π jk/n)`` (real and symmetric), the 2-D DFT is ``F_s X F_h`` and

    Re(F_s X F_h) = Re((C_s - i S_s) X (C_h - i S_h)) = C_s @ X @ C_h - S_s @ X @ S_h.

Each matched module gets a per-instance forward returning ``(C_s @ X @ C_h - S_s @ X @ S_h,)``:
four real matmuls and a subtraction, issued as ordinary torch calls inside the forward, so the
stick-aligned forms of the other adapters (``stick-align-padding``'s zero-padded reduction dims
for a sequence of 7 or a hidden size of 32) cover them as any other matmul. The matrices are
built on the host in float64 from the sizes of the call (``jk`` reduced modulo ``n`` first, so
every angle is an exact multiple of ``2π/n``), cast to the activation's dtype and moved to its
device once; they are kept in a small cache held by the bound forwards (per size, dtype and
device), never in the module: parameters, buffers, the state dict, the config and the output
shapes are the stock ones. Inputs of another rank, not floating point, or with an empty
sequence or hidden dim run the stock forward.

Matched structurally: every module whose forward (its decorator chain) names
``fourier_transform`` and ``real``, that holds no parameter or buffer and whose
``fourier_transform`` holds no tensor, and whose forward, on a real float64 probe
``[2, 3, 5]``, returns exactly one tensor equal to ``torch.fft.fftn(probe, dim=(1, 2)).real``
(so a transform with another normalisation, over other dims, or not a Fourier transform at
all, is left alone).

Declined: the DFT-matrix form (``use_tpu_fourier_optimizations`` with SciPy and
``max_position_embeddings <= 4096``). There the stock forward multiplies by two complex64
matrices that the module holds as persistent buffers (``dft_mat_seq``, sized by the fixed
``tpu_short_seq_length`` and cut to the input's length; ``dft_mat_hidden``), captured by the
``fourier_transform`` partial when the module is built. Those buffers are state the device
cannot store (it has no complex format), and what the stock forward computes is what the
captured tensors hold (after ``from_pretrained`` in Transformers 5.15 the partial still holds
the meta placeholders and the stock forward fails even on the CPU): matrices rebuilt from the
sizes would compute something the stock model does not. Such a module holds buffers, so it does not
match, and the model still stops with gap ``complex``. The model-level check of that
configuration (``tpu_short_seq_length`` must equal the input's length) is in the model's own
forward, which this adapter leaves alone.
"""

from __future__ import annotations

import math
import types
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions, forward_function
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = [
    "CACHE_SIZE",
    "NAMES",
    "PROBE_SHAPE",
    "DftMatrices",
    "RealDft",
    "adapter",
    "dft_matrices",
    "mixes_by_dft",
    "real_dft",
]

#: Names the stock forward takes the real part of the transform with.
NAMES = ("fourier_transform", "real")
#: Sizes of the probe a candidate forward must transform as the 2-D DFT (three distinct dims).
PROBE_SHAPE = (2, 3, 5)
#: Cached matrix pairs per set of bound forwards (sizes, dtypes and devices seen recently).
CACHE_SIZE = 16


def dft_matrices(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C_n, S_n)``: ``cos(2π jk/n)`` and ``sin(2π jk/n)``, float64 ``[n, n]`` on the host,
    the real part and minus the imaginary part of the DFT matrix ``exp(-2πi jk/n)``."""
    index = torch.arange(n, dtype=torch.int64, device="cpu")
    turns = torch.outer(index, index) % n  # exact: the angle is a multiple of 2π/n below 2π
    angle = turns.to(torch.float64) * (2.0 * math.pi / n)
    return torch.cos(angle), torch.sin(angle)


class DftMatrices:
    """``(C_n, S_n)`` in a given dtype on a given device, built on the host once per size,
    dtype and device (the ``CACHE_SIZE`` most recently used are kept)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._pairs: OrderedDict[
            tuple[int, torch.dtype, torch.device], tuple[torch.Tensor, torch.Tensor]
        ] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pairs)

    def get(self, n: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pair for size ``n`` in ``like``'s dtype, on ``like``'s device."""
        if torch.compiler.is_compiling():  # traced: built as constants of the graph
            return self._build(n, like)
        key = (n, like.dtype, like.device)
        pair = self._pairs.get(key)
        if pair is None:
            pair = self._pairs[key] = self._build(n, like)
            while len(self._pairs) > self._size:
                self._pairs.popitem(last=False)
        else:
            self._pairs.move_to_end(key)
        return pair

    @staticmethod
    def _build(n: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # ordinary tensors even when first asked for under inference_mode: a later forward
        # with gradients may save them for backward
        with torch.inference_mode(False), torch.no_grad():
            cos, sin = dft_matrices(n)
            return (
                cos.to(dtype=like.dtype).to(like.device),
                sin.to(dtype=like.dtype).to(like.device),
            )


def real_dft(hidden_states: torch.Tensor, matrices: DftMatrices) -> torch.Tensor:
    """``torch.fft.fftn(hidden_states, dim=(1, 2)).real`` of a real ``[batch, seq, hidden]``
    tensor, as ``C_s @ X @ C_h - S_s @ X @ S_h`` (see the module docstring)."""
    _, seq, hidden = hidden_states.shape
    cos_s, sin_s = matrices.get(seq, hidden_states)
    cos_h, sin_h = matrices.get(hidden, hidden_states)
    return cos_s @ hidden_states @ cos_h - sin_s @ hidden_states @ sin_h


def _forward_for(
    stock: Callable[..., Any], matrices: DftMatrices
) -> Callable[[nn.Module, torch.Tensor], Any]:
    """The forward bound to one mixing module: the real matmul form for real 3-D inputs, the
    ``stock`` forward otherwise (other ranks; an empty sequence or hidden dim, which the stock
    FFT refuses with its own error)."""

    def forward(self: nn.Module, hidden_states: torch.Tensor) -> Any:
        shape = hidden_states.shape
        if len(shape) != 3 or not hidden_states.is_floating_point() or 0 in shape[1:]:
            return stock(self, hidden_states)
        return (real_dft(hidden_states, matrices),)

    return forward


#: The code of every forward this adapter binds (an adapted module's forward runs it).
_ADAPTED_CODE = cast(types.FunctionType, _forward_for(lambda *args: None, DftMatrices())).__code__


def _holds_tensor(transform: Any) -> bool:
    """``transform`` (a ``partial``, a function, or a chain of them) holds a tensor: among a
    partial's arguments or a function's closure cells."""
    while isinstance(transform, partial):
        held = (*transform.args, *transform.keywords.values())
        if any(isinstance(value, torch.Tensor) for value in held):
            return True
        transform = transform.func
    if isinstance(transform, types.MethodType):
        transform = transform.__func__
    if isinstance(transform, types.FunctionType):
        for cell in transform.__closure__ or ():
            try:
                if isinstance(cell.cell_contents, torch.Tensor):
                    return True
            except ValueError:  # an empty cell
                continue
    return False


def _probe() -> torch.Tensor:
    """A real float64 ``PROBE_SHAPE`` tensor of irregular values, drawn from no generator."""
    count = math.prod(PROBE_SHAPE)
    values = torch.arange(count, dtype=torch.float64, device="cpu")
    return (torch.cos(values * 1.7) + values / count).reshape(PROBE_SHAPE)


def _transforms_as_dft(forward: types.FunctionType, module: nn.Module) -> bool:
    """``forward(module, probe)`` returns ``(torch.fft.fftn(probe, dim=(1, 2)).real,)``."""
    probe = _probe()
    try:
        with torch.no_grad():
            out = forward(module, probe)
    except Exception:
        return False
    if not isinstance(out, tuple) or len(out) != 1 or not isinstance(out[0], torch.Tensor):
        return False
    got = out[0]
    if got.device != probe.device or got.dtype != probe.dtype or got.shape != probe.shape:
        return False
    expected = torch.fft.fftn(probe, dim=(1, 2)).real
    return bool(torch.allclose(got, expected, rtol=1e-9, atol=1e-9))


def mixes_by_dft(module: nn.Module) -> bool:
    """``module`` is a Fourier mixing module this adapter rewrites (the module docstring's
    matching rule); ``False`` for one it already rewrote."""
    forward = forward_function(module)
    if forward is None or forward.__code__ is _ADAPTED_CODE:
        return False
    if not all(code_mentions(forward, name) for name in NAMES):
        return False
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        return False  # the DFT-matrix form (complex64 buffers), or state the rewrite ignores
    transform = getattr(module, NAMES[0], None)
    if not callable(transform) or _holds_tensor(transform):
        return False
    return _transforms_as_dft(forward, module)


class RealDft(TargetedAdapter[tuple[str, types.FunctionType]]):
    """The ``real-dft`` adapter, version 1.0 (see the module docstring)."""

    name = "real-dft"
    missing = (
        "no module returns the real part of a 2-D Fourier transform of its input "
        "(self.fourier_transform(x).real)"
    )

    def targets(self, model: nn.Module) -> list[tuple[str, types.FunctionType]]:
        found: list[tuple[str, types.FunctionType]] = []
        for path, module in model.named_modules():
            if mixes_by_dft(module):
                forward = forward_function(module)
                assert forward is not None
                found.append((path, forward))
        return found

    def edit_targets(
        self, model: nn.Module, edit: ModelEdit, targets: list[tuple[str, types.FunctionType]]
    ) -> None:
        matrices = DftMatrices()  # shared by the model's mixing layers
        for path, stock in targets:
            edit.bind_forward(model.get_submodule(path), _forward_for(stock, matrices))


adapter = RealDft()
