"""Results that hold NaN their operands did not: where the device made a NaN.

DL16 has no subnormals and its smallest normal is ``2**-30``: a smaller magnitude is stored as
zero. A model that divides by a norm of very small activations (CLIP-style heads normalise
their embeddings with ``x / x.norm()``; Transformers' tiny tester models, with every norm's
epsilon set to 1, produce pooled vision features near ``1e-12``) divides two tiny, nonzero
numbers on the CPU and ``0 / 0`` on the device. The device computes that faithfully: the NaN is
a consequence of its number format, not a miscompile. It is counted
(``telemetry.count_nan_made``, per op and module) so that a test that then finds NaN in an
output is reported as precision with the op and module where the NaN began, not left
unexplained, and so that a NaN no test looks at still shows in the run's summary.

Only ops that can make NaN from NaN-free operands are checked (:data:`NAN_MAKERS`): division,
roots, logarithms, powers, inverse trigonometry, remainders and the variance family (one
element, correction 1). Sums, products and matmuls would need an infinity, which DL16 does not
have (it saturates). The check costs one ``isnan().any()`` on such an op's result; the operands
are read only when the result holds NaN, or before an in-place op writes its first operand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

# a module import, not a name: _host_arguments imports _tensor, which is still loading when
# _op_info imports this module
from spyre_sim import _host_arguments

__all__ = ["NAN_MAKERS", "clean", "made_nan"]

#: Op packets (``aten.<name>``) whose result can hold NaN when no operand does.
NAN_MAKERS = frozenset(
    f"aten.{name}{suffix}"
    for name in (
        "div", "true_divide", "floor_divide", "sqrt", "rsqrt", "log", "log2", "log10",
        "log1p", "pow", "float_power", "asin", "acos", "atanh", "acosh", "fmod", "remainder",
        "xlogy", "var", "std", "var_mean", "std_mean", "logit",
    )
    for suffix in ("", "_")
)  # fmt: skip


def _has_nan(value: torch.Tensor) -> bool:
    return value.is_floating_point() and bool(torch.isnan(value).any())


def clean(values: Sequence[Any]) -> bool:
    """Whether no tensor among ``values`` (host operands, tensors in lists included) holds NaN,
    and no float operand is NaN."""
    for value in values:
        if isinstance(value, float) and value != value:
            return False
    return not any(_has_nan(t) for t in _host_arguments.host_tensors(values))


def made_nan(out: Any, operands: Sequence[Any], clean_before: bool | None = None) -> bool:
    """Whether ``out`` (an op's host result, or a tuple of them) holds NaN that ``operands`` did
    not. ``clean_before``: for an in-place op, whether the operands were NaN-free before it
    wrote them (:func:`clean`, taken before the call), since the written operand is the result.
    """
    if not any(_has_nan(t) for t in _host_arguments.host_tensors([out])):
        return False
    return clean(operands) if clean_before is None else clean_before
