"""Rewrites of ``pow`` with a number exponent into ops a stack release lowers natively.

Until torch-spyre #4479 the stack compiles ``pow`` with a number exponent only as a multiply
chain for the exponents 2, 3 and 4 (gap ``pow-exponent``); the vector norms of dual encoders
(CLIP-style ``x.pow(2).sum(-1).pow(0.5)``) raise. PyTorch's decomposition of the op computes in
a wider dtype (a cast the same releases refuse), so the op bridge's ``rewrite`` candidate
reads the forms here: exact elementwise ops (``sqrt``, ``rsqrt``, ``reciprocal``) with
``torch.pow``'s values where those ops differ from it. Registered in
:data:`spyre_adapters.library._op_rewrites.REWRITES` when this module is imported (the bridge
loop imports it, and so does every generated bridge that uses one of its rewrites); whether a
rewrite holds at a release is validated on the device, never assumed.

Exponents without an exact form (``exp(p * log|x|)``, longer products) are refused with
``NotImplementedError``: they do not hold within fp16's tolerance of the op's per-op tests.
"""

from __future__ import annotations

import math

import torch

from spyre_adapters.library._op_rewrites import rewrite

__all__ = ["pow_tensor_scalar"]


@rewrite("aten.pow.Tensor_Scalar")
def pow_tensor_scalar(values: torch.Tensor, exponent: float) -> torch.Tensor:
    """``values ** exponent`` for the exponents 0.5 (``sqrt``), -0.5 (``rsqrt``) and -1
    (``reciprocal``), with ``(-inf) ** 0.5 == inf``, ``(+-0) ** -0.5 == inf`` and
    ``(-inf) ** -0.5 == 0`` as ``torch.pow`` gives them; a floating-point base only."""
    if not values.is_floating_point():
        raise NotImplementedError("the pow rewrite covers floating-point bases only")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        raise NotImplementedError(f"the pow rewrite covers number exponents, not {exponent!r}")
    if exponent == 0.5:
        return torch.where(values == -math.inf, math.inf, torch.sqrt(values))
    if exponent == -0.5:
        out = torch.where(values == 0, math.inf, torch.rsqrt(values))
        return torch.where(values == -math.inf, 0.0, out)
    if exponent == -1:
        return torch.reciprocal(values)
    raise NotImplementedError(
        f"the pow rewrite covers the exponents 0.5, -0.5 and -1, not {exponent!r}"
    )
