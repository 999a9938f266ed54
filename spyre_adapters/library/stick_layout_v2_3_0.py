"""``head-padding`` 2.3.0: 2.2.0, and cuts of the stick dim that come with other indices.

2.2.0 (:mod:`spyre_adapters.library.stick_layout_v2_2_0`) rewrites a cut of the last dim only
when the cut is all the index does. Detection heads cut their 4-element boxes with other
entries in the same index (RT-DETR's ``reference_points[:, :, None, :, None, :2]``, YOLOS's
``boxes[:, None, :2]``), which still stopped them at ``sub-stick-head``. 2.3.0 also runs the
forwards under :mod:`spyre_adapters.library._stick_layout_indexed`, which computes the cut as
a selection matmul and then the rest of the index. Matching and every other rewrite are
2.2.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_indexed
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout_v2_2_0 import HeadLayoutIntegers

__all__ = ["HeadLayoutIndexed", "head_padding"]


class HeadLayoutIndexed(HeadLayoutIntegers):
    """``head-padding`` 2.3.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _stick_layout_indexed.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutIndexed()
