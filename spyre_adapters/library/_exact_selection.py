"""Selection and placement matmuls that keep infinities and NaN where the stock op keeps them.

The stick-layout rewrites compute a cut of the stick dim the release refuses (``x[..., :n]``,
``narrow``, ``split``, a head split, a write into a cut) as ``x @ S``, with ``S`` a 0/1 matrix
holding at most one 1 per column (:mod:`spyre_adapters.library._stick_layout`). Every output
element is one input element times 1 plus the other elements of its row times 0: the stock
value for every finite input. But ``0 * inf`` and ``0 * nan`` are NaN, so one non-finite
element turns every element computed from its row into NaN, where the stock cut keeps it in its
own column or drops it. DeepSeek-V4's attention builds ``block_bias = new_full(..., -inf)``
and returns ``block_bias[..., :compressed_len]``: with host numerics (functional mode) every
row came back NaN and its batching and save/load tests failed. DL16 has no infinity (-inf is
held as a large finite number), so the device meets this with a NaN computed on it, which the
first generation of these rewrites spread over its row the same way.

:func:`carried` computes such a product exactly for every input:

- ``finite = (x - x) == 0``: true for finite elements, false for infinities and NaN (both
  give NaN); built from ``sub`` and ``eq``, which every release lowers (``isinf``/``isnan``
  are gap ``nan-inf-test``);
- the finite part, ``where(finite, x, 0)``, goes through the product: the stock values of
  the finite elements, zeros for the others;
- a code of the others goes through the same product: 0 for finite, 1 for +inf, -1 for -inf
  (their ``clamp`` to [-1, 1]), 2 for NaN (``x == x`` is false). Small integers times 0/1
  plus exact zeros: exact in every dtype. Only ops every release lowers are used (``gt`` and
  ``lt`` are not, before 2026.03);
- where the selected code is not 0, the result is the non-finite value it codes.

Only functions whose product is a selection or placement may go through it
(:func:`selection_matmul`): for a general matrix the code would be meaningless.

The rewrites themselves are the first generation's, unchanged: :func:`rebound` gives a copy of
a function of that generation whose global names listed in ``replacements`` resolve to the
replacements, so ``select_columns``, ``split_heads`` and ``assign_columns`` are the same code
with ``padded_matmul`` resolved to :func:`selection_matmul`. (The first generation's modules are
frozen: each released adapter version's implementation hash covers them,
``manifests/released.sha256``.)
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch

from spyre_adapters.library import _stick_layout

__all__ = [
    "assign_columns",
    "carried",
    "copied",
    "rebound",
    "select_columns",
    "selection_matmul",
    "split_heads",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the code of a NaN (+inf and -inf are coded by their sign: 1 and -1; finite values by 0)
_NAN_CODE = 2.0


def carried(product: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``product(x)``, for a ``product`` that multiplies the last dim of ``x`` by a 0/1 matrix
    with at most one 1 per column, with every infinity and NaN of ``x`` in the column(s) the
    product puts it in (see the module docstring)."""
    finite = (x - x) == 0
    values = product(torch.where(finite, x, 0.0))
    signs = torch.where(x == x, x.clamp(-1.0, 1.0), _NAN_CODE)  # +-inf: +-1; NaN: 2
    code = product(torch.where(finite, 0.0, signs))
    special = torch.where(code == _NAN_CODE, float("nan"), code * float("inf"))
    return torch.where(code == 0, values, special)


def selection_matmul(x: torch.Tensor, selection: torch.Tensor) -> torch.Tensor:
    """``padded_matmul(x, selection)`` for a 0/1 ``selection`` with at most one 1 per column,
    carrying non-finite elements (:func:`carried`)."""
    return carried(lambda part: _stick_layout.padded_matmul(part, selection), x)


def copied(function: F, names: dict[str, Any]) -> F:
    """A copy of ``function`` that looks its global names up in ``names``."""
    copy = types.FunctionType(
        function.__code__, names, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__doc__ = function.__doc__
    return copy  # type: ignore[return-value]


def rebound(function: F, replacements: Mapping[str, Any]) -> F:
    """A copy of ``function`` whose global names in ``replacements`` resolve to them (every
    other global name to its module's, looked up when called, as for ``function``)."""
    return copied(function, {**function.__globals__, **replacements})


_EXACT = {"padded_matmul": selection_matmul}

#: ``x[..., start:start + length]`` as a selection matmul (a contiguous result), exact
select_columns = rebound(_stick_layout.select_columns, _EXACT)
#: ``x.view(sizes)`` splitting the last dim into pieces below a stick, exact
split_heads = rebound(_stick_layout.split_heads, _EXACT)
#: ``x[..., start:start + length] = value`` without cutting the stick dim, exact
assign_columns = rebound(_stick_layout.assign_columns, _EXACT)
