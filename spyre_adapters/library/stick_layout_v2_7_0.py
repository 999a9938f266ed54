"""``head-padding`` 2.7.0: 2.6.0's rewrites, also for head splits written with ``view_as`` or
``reshape_as``.

2.6.0 (:mod:`spyre_adapters.library.stick_layout_v2_6_0`) computes a view that splits the
stick dim into heads narrower than a stick when the model writes it with ``view``,
``reshape`` or ``unflatten``. Beam's attention gate writes it as
``gate_proj(h).view_as(attn_output)``: ``[1, 9, 40] -> [1, 9, 5, 8]`` reached the device and
stopped at ``sub-stick-head``. 2.7.0 enables the same kinds in
:mod:`spyre_adapters.library._stick_layout_chain_v2`, whose first link computes ``view_as``
and ``reshape_as`` as ``view`` and ``reshape`` with the other tensor's sizes, so the split is
rewritten as every other view is. Matching is 2.6.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout, _stick_layout_chain_v2, _stick_layout_views_as
from spyre_adapters.library.stick_layout_v2_6_0 import KINDS as KINDS_V2_6
from spyre_adapters.library.stick_layout_v2_6_0 import HeadLayoutChained

__all__ = ["KINDS", "HeadLayoutViewsAs", "head_padding"]

#: 2.6.0's chained kinds and ``views-as``, each with the feature ``sub-stick-head``
KINDS = (_stick_layout_views_as.KIND, *KINDS_V2_6)


class HeadLayoutViewsAs(HeadLayoutChained):
    """``head-padding`` 2.7.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout.enable(model, edit, "sub-stick-head")
        _stick_layout_chain_v2.enable(model, edit, KINDS, "sub-stick-head")


head_padding = HeadLayoutViewsAs()
