"""Two-operand ``torch.einsum`` computed from steps the other rewrites can see: the
``einsum-pieces`` adapter (gap ``sub-stick-head``).

``torch.einsum`` permutes, reshapes and batch-multiplies its operands inside ATen, below every
``TorchFunctionMode``. When its output splits a merged group of dims back into dims narrower
than a stick, that split is a view of the stick dim the device refuses (``sub-stick-head``,
lasting: this adapter is permanent), and no adapter saw it: MaskFormer's
``einsum("bqc,bchw->bqhw", masks, pixels)`` ends with a view ``[b, q, h * w] -> [b, q, 1, h, w]``
(a 48-wide map), XLNet's ``einsum("ibh,hnd->ibnd", x, weight)`` with heads of 8.

:class:`EinsumPieces` is a ``TorchFunctionMode`` that, inside the forwards it is bound to,
computes a two-operand ``einsum`` with an explicit output that sums over a letter both
operands have (``"ab,bc->ac"``; letters, no ellipsis, no letter twice in one operand or in the
output) the way ATen's own contraction
does, as calls the modes under it see: a sum over each letter only one operand has and the
output lacks, a permute of each operand to ``[batch, kept, contracted]`` and
``[batch, contracted, kept]``, a reshape that merges each group, ``torch.matmul``, a reshape
that splits the groups again and a permute to the output's order. The final split is a
``view`` that ``head-padding`` computes with placement matmuls where the device refuses it,
and the matmul one ``stick-align-padding`` pads. The arithmetic is the stock one (one product
per term, summed by a matmul, as ATen's ``bmm`` does); on the CPU the values agree with
``torch.einsum`` to the rounding of a different summation order. Any other einsum runs as it
is.

Matched structurally: every module whose class (itself or a base outside ``torch.nn``)
defines a function that names ``einsum``; its forward is bound, per instance, to run under
:class:`EinsumPieces`, so a method the forward calls (MaskFormer's ``get_logits``) is covered.
Nothing the model shows changes: parameters, buffers, the state dict, the config and every
output shape are the stock ones.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["EinsumPieces", "EinsumPiecesAdapter", "adapter", "contract", "parse"]


def parse(equation: str, ranks: Sequence[int]) -> tuple[str, str, str] | None:
    """``(a, b, out)`` letter strings of a two-operand equation this adapter computes, or
    ``None`` (implicit output, ellipsis, a letter repeated, a rank that does not fit)."""
    text = equation.replace(" ", "")
    if "->" not in text or "." in text:
        return None
    inputs, out = text.split("->")
    parts = inputs.split(",")
    if len(parts) != 2 or len(ranks) != 2:
        return None
    a, b = parts
    if not all(s.isalpha() and s.isascii() for s in (a, b)) or not (out == "" or out.isalpha()):
        return None
    if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out):
        return None
    if len(a) != ranks[0] or len(b) != ranks[1] or not set(out) <= set(a) | set(b):
        return None
    return a, b, out


def _sum_lone(x: torch.Tensor, letters: str, other: str, out: str) -> tuple[torch.Tensor, str]:
    """``x`` summed over the letters neither the other operand nor the output has."""
    lone = [i for i, c in enumerate(letters) if c not in other and c not in out]
    if not lone:
        return x, letters
    return x.sum(dim=lone), "".join(c for c in letters if c not in {letters[i] for i in lone})


def contract(equation: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """``torch.einsum(equation, x, y)`` as sum, permute, reshape, matmul, reshape, permute
    (module docstring), or ``None`` when the equation is not one this adapter computes."""
    letters = parse(equation, (x.dim(), y.dim()))
    if letters is None:
        return None
    a, b, out = letters
    x, a = _sum_lone(x, a, b, out)
    y, b = _sum_lone(y, b, a, out)
    size = {c: x.shape[i] for i, c in enumerate(a)}
    for i, c in enumerate(b):
        if c in size and size[c] != y.shape[i] and 1 not in (size[c], y.shape[i]):
            return None  # let einsum say what is wrong
        size[c] = max(size.get(c, 1), y.shape[i])
    inner = [c for c in a if c in b and c not in out]
    if not inner:
        return None  # products without a sum: ATen multiplies, it splits no merged group
    if any(x.shape[a.index(c)] != y.shape[b.index(c)] for c in inner):
        return None  # a broadcast contraction: left to einsum
    batch = [c for c in out if c in a and c in b]
    left = [c for c in out if c in a and c not in b]
    right = [c for c in out if c in b and c not in a]
    xs = x.permute([a.index(c) for c in (*batch, *left, *inner)])
    ys = y.permute([b.index(c) for c in (*batch, *inner, *right)])
    batch_sizes = [xs.shape[i] for i in range(len(batch))]
    y_batch = [ys.shape[i] for i in range(len(batch))]
    rows = math.prod(size[c] for c in left)
    depth = math.prod(size[c] for c in inner)
    cols = math.prod(size[c] for c in right)
    if len(left) != 1 or len(inner) != 1:
        xs = xs.reshape(*batch_sizes, rows, depth)
    if len(inner) != 1 or len(right) != 1:
        ys = ys.reshape(*y_batch, depth, cols)
    if not left:
        xs = xs.reshape(*batch_sizes, 1, depth)
    if not right:
        ys = ys.reshape(*y_batch, depth, 1)
    product = torch.matmul(xs, ys)
    grouped = [*(product.shape[i] for i in range(len(batch))), *(size[c] for c in left)]
    grouped += [size[c] for c in right]
    if list(product.shape) != grouped:
        product = product.reshape(grouped)
    order = [*batch, *left, *right]
    if order != list(out):
        product = product.permute([order.index(c) for c in out])
    return product


class EinsumPieces(TorchFunctionMode):
    """Computes two-operand ``einsum`` from visible steps (module docstring); every other call
    runs unchanged."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.einsum and not kwargs and args and isinstance(args[0], str):
            operands = args[1:]
            if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
                operands = tuple(operands[0])
            if len(operands) == 2 and all(isinstance(o, torch.Tensor) for o in operands):
                x, y = operands
                if x.dtype == y.dtype and x.dtype.is_floating_point:
                    result = contract(args[0], x, y)
                    if result is not None:
                        return result
        return func(*args, **kwargs)


def _forward_under_mode(stock: Callable[..., Any]) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with EinsumPieces():
            return stock(self, *args, **kwargs)

    return forward


#: The code of every forward this adapter binds (an adapted module runs it: not matched again).
_ADAPTED_CODE = _forward_under_mode(lambda *args, **kwargs: None).__code__


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _class_mentions(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base outside ``torch.nn`` defines a function naming ``name``."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch.") or klass is object:
            continue
        for value in vars(klass).values():
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(fn, types.FunctionType) and any(
                name in code.co_names for code in _codes(fn.__code__)
            ):
                return True
    return False


class EinsumPiecesAdapter(TargetedAdapter[str]):
    """``einsum-pieces`` (see the module docstring)."""

    name = "einsum-pieces"
    missing = "no module whose class defines a function that calls einsum"

    def targets(self, model: nn.Module) -> list[str]:
        found = []
        for path, module in model.named_modules():
            fn = forward_function(module)
            if fn is None or fn.__code__ is _ADAPTED_CODE:
                continue
            if _class_mentions(type(module), "einsum"):
                found.append(path)
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[str]) -> None:
        for path in targets:
            module = model.get_submodule(path)
            stock = forward_function(module)
            assert stock is not None
            edit.bind_forward(module, _forward_under_mode(stock))


adapter = EinsumPiecesAdapter()
