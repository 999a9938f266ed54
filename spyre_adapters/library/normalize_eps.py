"""``F.normalize`` with an epsilon the device can hold (gap ``eps-underflow``): permanent.

``torch.nn.functional.normalize(x, eps=1e-12)`` divides by ``max(norm, eps)``. DL16 has no
subnormals and nothing below 2**-30, and the emulator's fp16 host storage nothing below 2**-24,
so on the device the bound is zero and a row of zeros normalises to 0/0 = NaN where the CPU
returns zeros (Swin V2's cosine attention over zero-padded windows). Every model that pads
before a cosine similarity meets it.

While a forward that calls ``normalize`` runs, a half-precision (fp16) input whose ``eps``
rounds to zero in fp16 is normalised with ``eps = 2**-24`` instead (fp16's smallest positive
number, a DL16 normal). That is exact, not an approximation: a nonzero fp16 row has a norm of
at least its largest magnitude, so at least 2**-24, and ``max(norm, 2**-24) == norm`` as with
any smaller eps; a zero row gives 0 / 2**-24 = 0, the fp32 result. fp32 and bf16 inputs (whose
eps the host holds) and calls with ``out=`` are left alone.

Matched structurally: modules whose forward calls ``normalize``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._mode_scoped_forward import ModeScopedForward

__all__ = ["HELD_EPS", "NormalizeEps", "NormalizeEpsMode", "adapter"]

HELD_EPS = 2.0**-24
"""The eps a flushed one is replaced by: fp16's smallest positive number."""

_DEFAULT_EPS = 1e-12


def _flushed(eps: object) -> bool:
    return (
        isinstance(eps, (int, float))
        and not isinstance(eps, bool)
        and 0 < eps < HELD_EPS
        and torch.tensor(float(eps), dtype=torch.float16).item() == 0.0
    )


class NormalizeEpsMode(TorchFunctionMode):
    """While active, ``F.normalize`` of an fp16 input keeps an eps fp16 can hold."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if (
            func is nn.functional.normalize
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].dtype is torch.float16
            and kwargs.get("out") is None
        ):
            eps = args[3] if len(args) > 3 else kwargs.get("eps", _DEFAULT_EPS)
            if _flushed(eps):
                args = tuple(args[:3])
                kwargs["eps"] = HELD_EPS
        return func(*args, **kwargs)


class NormalizeEps(ModeScopedForward):
    """The ``normalize-eps`` adapter (see the module docstring)."""

    name = "normalize-eps"
    missing = "no forward calls normalize"
    mode = NormalizeEpsMode
    mark = "_spyre_normalize_eps"
    calls = "normalize"


adapter = NormalizeEps()
