"""``head-padding`` 2.2.0: 2.1.1, and splits of integer tensors' stick dim on the host.

2.1.1 (:mod:`spyre_adapters.library.stick_layout_v2_1_1`) rewrites splits of floating tensors
only; a split of an integer or bool tensor's stick dim below a stick (LongT5's blocked
attention mask, ``[13, 12] -> [13, 2, 6]`` of int32) still stopped the model at
``sub-stick-head``. 2.2.0 also runs the forwards under
:mod:`spyre_adapters.library._stick_layout_int`, which computes those on the host. Matching
and the floating rewrites are 2.1.1's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_int
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout_v2_1_1 import HeadLayoutWritesUnwrapped

__all__ = ["HeadLayoutIntegers", "head_padding"]


class HeadLayoutIntegers(HeadLayoutWritesUnwrapped):
    """``head-padding`` 2.2.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _stick_layout_int.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutIntegers()
