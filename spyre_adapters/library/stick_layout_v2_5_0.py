"""``head-padding`` 2.5.0: 2.4.0, and head splits whose shape holds integer tensors.

2.4.0 (:mod:`spyre_adapters.library.stick_layout_v2_4_0`) rewrites a view that splits the
stick dim below a stick only when its target shape is Python integers; OneFormer's pixel
decoder passes elements of a spatial-shapes tensor
(``view(bs, -1, spatial_shapes[i][0], spatial_shapes[i][1])``), which stopped the model at
``sub-stick-head``. 2.5.0 also runs the forwards under
:mod:`spyre_adapters.library._stick_layout_sizes`, which reads such entries as integers (as
PyTorch's own view does) before the rewrite sees the call. Matching and every other rewrite
are 2.4.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_sizes
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout_v2_4_0 import HeadLayoutIndexedWrites

__all__ = ["HeadLayoutTensorSizes", "head_padding"]


class HeadLayoutTensorSizes(HeadLayoutIndexedWrites):
    """``head-padding`` 2.5.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _stick_layout_sizes.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutTensorSizes()
