"""``einsum-pieces`` 1.1: 1.0's einsum pieces, also where the einsum sits behind decorators.

1.0 (:mod:`spyre_adapters.library.einsum_pieces`) binds the forwards of modules whose class
defines a function naming ``einsum``, read from the functions the class holds. A forward
wrapped by decorators (Transformers' ``capture_outputs`` and ``merge_with_config_defaults``)
is held as the decorators' wrapper, whose own code names no ``einsum``: SAM 3's mask decoder,
``einsum("bqc,bchw->bqhw")`` over a 32 x 32 map as in MaskFormer, was not matched and its
split stopped every test at ``sub-stick-head``. 1.1 also matches a module whose forward's
decorator chain (the functions the wrappers hold) names ``einsum``, and binds the forwards
with the shared mode-scoped binding (:class:`ModeScopedForward`) instead of its own copy.
The mode and the arithmetic are 1.0's.
"""

from __future__ import annotations

import types

from torch import nn

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward
from spyre_adapters.library.einsum_pieces import _ADAPTED_CODE, EinsumPieces, _class_mentions

__all__ = ["EinsumPiecesV11", "adapter"]

_MARK = "_spyre_einsum_pieces_v1_1"


class EinsumPiecesV11(ModeScopedForward):
    """``einsum-pieces`` 1.1 (see the module docstring)."""

    name = "einsum-pieces"
    missing = "no module whose class or forward calls einsum"
    mode = EinsumPieces
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        def selected(module: nn.Module, fn: types.FunctionType) -> bool:
            if fn.__code__ is _ADAPTED_CODE:
                return False  # 1.0 bound it already
            return _class_mentions(type(module), "einsum") or code_mentions(fn, "einsum")

        return selected


adapter = EinsumPiecesV11()
