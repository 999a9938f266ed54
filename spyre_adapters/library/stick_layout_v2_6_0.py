"""``head-padding`` 2.6.0: 2.5.0's rewrites in one chained mode.

2.5.0 (:mod:`spyre_adapters.library.stick_layout_v2_5_0`) runs a model's forwards under six
modes of its own (``stick-layout``, ``-writes-2``, ``-int``, ``-indexed``, ``-indexed-writes``,
``-sizes``), through which every torch call passes. 2.6.0 enables ``stick-layout`` as before
and the other five as one :mod:`spyre_adapters.library._stick_layout_chain` mode, which gives
a call only to the modes that rewrite its function, in the same order: the same rewrites, the
same results, fewer Python frames per call. Matching is 2.5.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import (
    _cut_writes_v2,
    _stick_layout,
    _stick_layout_chain,
    _stick_layout_indexed,
    _stick_layout_indexed_writes,
    _stick_layout_int,
    _stick_layout_sizes,
)
from spyre_adapters.library.stick_layout_v2_5_0 import HeadLayoutTensorSizes

__all__ = ["KINDS", "HeadLayoutChained", "head_padding"]

#: the kinds 2.5.0 enables besides ``stick-layout``, each with the feature ``sub-stick-head``
KINDS = (
    _cut_writes_v2.KIND,
    _stick_layout_int.KIND,
    _stick_layout_indexed.KIND,
    _stick_layout_indexed_writes.KIND,
    _stick_layout_sizes.KIND,
)


class HeadLayoutChained(HeadLayoutTensorSizes):
    """``head-padding`` 2.6.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout.enable(model, edit, "sub-stick-head")
        _stick_layout_chain.enable(model, edit, KINDS, "sub-stick-head")


head_padding = HeadLayoutChained()
