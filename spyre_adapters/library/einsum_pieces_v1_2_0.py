"""``einsum-pieces`` 1.2: 1.1's einsum pieces, also where the einsum sits in a helper function.

1.1 (:mod:`spyre_adapters.library.einsum_pieces_v1_1_0`) binds the forwards of modules whose
class, or whose forward's decorator chain, holds a function naming ``einsum``. A model that
computes its einsums in a module-level helper the class calls by its global name was not
matched: Transformers 5.25's Mamba2 mixer calls ``mamba2_scan_forward``, which calls
``mamba2_chunk_scan``, whose
``einsum("bzch,bzhpn->bchpn", decay, states)`` splits a merged ``head_dim x state_size``
group back into two dims; with both 16, ``[8, 2, 256] -> [8, 2, 1, 1, 16, 16]`` is a view of
the stick dim the device refuses (``sub-stick-head``), and the model stopped there. Bamba,
Falcon-H1, GraniteMoeHybrid, Nemotron-H and Zamba2 share that helper; LongT5, FNet, ViTDet and
TAPAS hold einsums in helpers too.

1.2 also matches a module when a function it would match by (its class's functions, its
forward's decorator chain) calls, by a global name of its own module, a helper whose code names
``einsum``, or that calls such a helper in turn, down to :data:`DEPTH` calls. A helper is a
plain function outside ``torch`` (its decorator chain included) or a module object held as a
global, through its forward: with the ``kernels`` package installed, Transformers' hub-kernel
decorators turn ``mamba2_scan_forward`` and ``mamba2_chunk_scan`` into such objects. The helper is not changed: the forward runs under 1.0's mode, which sees
every einsum the helper computes. The mode and the arithmetic are 1.0's; a module 1.1 matches
is matched alike.
"""

from __future__ import annotations

import types

from torch import nn

from spyre_adapters.library._class_answers import ClassAnswers
from spyre_adapters.library._global_rebinding import _chain, code_mentions, forward_function
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward
from spyre_adapters.library.einsum_pieces import _ADAPTED_CODE, EinsumPieces, _codes
from spyre_adapters.library.einsum_pieces_v1_1_0 import _MARK as _MARK_V1_1

__all__ = ["DEPTH", "EinsumPiecesV12", "adapter", "reaches"]

_MARK = "_spyre_einsum_pieces_v1_2"
_NAME = "einsum"

#: How many helper calls deep a function is followed from the function that calls it.
DEPTH = 3


def reaches(fn: types.FunctionType, name: str, depth: int = DEPTH) -> bool:
    """Whether ``fn`` (its nested functions and decorator chain included) names ``name``, or
    calls by a global name a helper that does, down to ``depth`` calls. A helper is a plain
    function outside ``torch``, or a module object held as a module global (the
    ``kernels`` package turns a decorated function into one) through its forward."""
    return _reaches(fn, name, depth, set())


def _reaches(
    fn: types.FunctionType, name: str, depth: int, seen: set[types.FunctionType]
) -> bool:  # fmt: skip
    if fn in seen:  # functions, not code: every kernels wrapper shares one forward's code
        return False
    seen.add(fn)
    chain = [(f, list(_codes(f.__code__))) for f in _chain(fn)]
    if any(name in code.co_names for _, codes in chain for code in codes):
        return True
    if depth == 0:
        return False
    for f, codes in chain:
        for code in codes:
            for global_name in code.co_names:
                helper = _helper(f.__globals__.get(global_name))
                if helper is not None and _reaches(helper, name, depth - 1, seen):
                    return True
    return False


def _helper(value: object) -> types.FunctionType | None:
    """The function a global name calls, when it is one to follow (see :func:`reaches`)."""
    if isinstance(value, nn.Module):
        value = forward_function(value)
    if isinstance(value, types.FunctionType) and not (value.__module__ or "").startswith("torch"):
        return value
    return None


def _class_reaches(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base outside ``torch.nn`` defines a function that reaches
    ``name`` (see :func:`reaches`)."""
    seen: set[types.FunctionType] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch.") or klass is object:
            continue
        for value in vars(klass).values():
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(fn, types.FunctionType) and _reaches(fn, name, DEPTH, seen):
                return True
    return False


#: The einsum answer per class: a model holds many instances of a few classes, and every
#: preparation asks again.
_class_reaches_einsum = ClassAnswers(lambda cls: _class_reaches(cls, _NAME))


class EinsumPiecesV12(ModeScopedForward):
    """``einsum-pieces`` 1.2 (see the module docstring)."""

    name = "einsum-pieces"
    missing = "no module whose class or forward calls einsum, directly or through a helper"
    mode = EinsumPieces
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        def selected(module: nn.Module, fn: types.FunctionType) -> bool:
            if fn.__code__ is _ADAPTED_CODE or getattr(fn, _MARK_V1_1, False):
                return False  # 1.0 or 1.1 bound it already
            return (
                code_mentions(fn, _NAME)
                or _class_reaches_einsum(type(module))
                or reaches(fn, _NAME)
            )

        return selected


adapter = EinsumPiecesV12()
