"""A power of an integer tensor computed as PyTorch computes it, in ops the device lowers: the
``integer-pow`` adapter (gap ``pow-int-base``).

The stack decomposes ``pow`` through floating-point ops and refuses an integer base (gap
``pow-int-base``, open at every release). Models raise integer tensors to a number in small
bookkeeping steps: LightGlue scales its descriptors by ``torch.full((), dim) ** 0.25`` (an
int64 scalar tensor, a float exponent), VideoLLaMA 3 counts merged patches with
``image_merge_sizes ** 2`` (an integer result). PyTorch computes the first by casting the base
to the result dtype (the default float dtype) and raising that, the second by integer
multiplication (repeated squaring, wrapping around as integer products do).

This adapter computes exactly that where the device refuses the call: while the model's
forwards (and ``generate``) run, it installs a handler of the device's refused calls of
``aten.pow.Tensor_Scalar`` (:mod:`spyre_sim.refusals`, scoped-mode kind
``integer-pow-refusals``). A refused call with an integer (not bool) base and

- a float exponent is ``pow(base.to(result dtype), exponent)``, the float ``pow`` the device
  lowers (or refuses at the releases where that exponent is its own gap, ``pow-exponent``);
- an integer exponent of at least 1 is the product of repeated squares of the base;

every other refused call is declined (an exponent of 0 or below, a float base): it goes to the
handler of another adapter for the op, if any (a generated ``bridge-pow-tensor-scalar``
rewrites float bases at some releases), or is refused as before. Calls the device lowers are
never touched, so a model with no integer power pays nothing. The values are the CPU's: the
same cast and the same products.

Matched structurally: a model with a module whose class (itself or a base outside ``torch``
and Transformers' shared modules) defines a function, other than its initialisers, that
raises to a power (``**`` or a ``pow`` call). Nothing the model shows changes: parameters,
buffers, the state dict, the config and every output shape are the stock ones.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._scoped_modes import enable, enabled, register_kind
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["KIND", "IntegerPow", "adapter", "computes_power", "integer_power"]

KIND = "integer-pow-refusals"

_POW = torch.ops.aten.pow.Tensor_Scalar
_POWER_OPS = frozenset({"**", "**="})
_SHARED = (
    "torch.",
    "transformers.modeling_utils",
    "transformers.generation",
    "transformers.integrations",
)


def integer_power(base: torch.Tensor, exponent: object) -> torch.Tensor | None:
    """``base ** exponent`` for an integer (not bool) tensor ``base`` as PyTorch computes it,
    in a cast and a float ``pow`` or in integer products; ``None`` for any other call (a float
    or bool base, an exponent that is no number, an integer exponent below 1)."""
    if base.is_floating_point() or base.is_complex() or base.dtype is torch.bool:
        return None
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        return None
    if isinstance(exponent, float):
        return torch.pow(base.to(torch.result_type(base, exponent)), exponent)
    if exponent < 1:
        return None
    result: torch.Tensor | None = None
    square = base
    remaining = exponent
    while True:
        if remaining & 1:
            if result is None:
                result = square.clone() if square is base else square
            else:
                result = torch.mul(result, square)
        remaining >>= 1
        if not remaining:
            assert result is not None
            return result
        square = torch.mul(square, square)


def _handle(
    op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: BaseException
) -> torch.Tensor:
    base = args[0] if args else kwargs.get("self")
    exponent = args[1] if len(args) > 1 else kwargs.get("exponent")
    result = integer_power(base, exponent) if isinstance(base, torch.Tensor) else None
    if result is None:
        raise refusal  # not an integer power: another handler's, or refused as before
    return result


def _factory(settings: frozenset[object]) -> Any:
    from spyre_sim.refusals import handling

    return handling({_POW: _handle})


register_kind(KIND, _factory)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _raises_to_a_power(code: types.CodeType) -> bool:
    if "pow" in code.co_names or "float_power" in code.co_names:
        return True
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("BINARY_POWER", "INPLACE_POWER"):  # Python 3.10
            return True
        if instruction.opname == "BINARY_OP" and instruction.argrepr in _POWER_OPS:
            return True
    return False


def computes_power(cls: type) -> bool:
    """Whether ``cls`` or a base outside torch and Transformers' shared modules defines a
    function (not an initialiser) that raises to a power."""
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(_SHARED):
            continue
        for name, value in vars(klass).items():
            if name.startswith(("__init", "_init", "init_")):
                continue
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(fn, types.FunctionType) and any(
                _raises_to_a_power(code) for code in _codes(fn.__code__)
            ):
                return True
    return False


class IntegerPow(TargetedAdapter[str]):
    """``integer-pow`` (see the module docstring)."""

    name = "integer-pow"
    missing = "no module whose class raises a tensor to a power"

    def targets(self, model: nn.Module) -> list[str]:
        if KIND in enabled(model):
            return []  # already adapted
        return [path for path, module in model.named_modules() if computes_power(type(module))]

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[str]) -> None:
        enable(model, edit, KIND, frozenset({"aten.pow.Tensor_Scalar"}))


adapter = IntegerPow()
