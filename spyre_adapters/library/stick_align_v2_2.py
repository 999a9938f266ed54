"""``stick-align-padding`` 2.2: 2.1's rewrites in one chained mode.

2.1 (:mod:`spyre_adapters.library.stick_align_v2_1`) runs a model's forwards under two modes
of its own (``stick-layout`` and ``stick-layout-folds``), through which every torch call
passes. 2.2 enables ``stick-layout`` as before and ``stick-layout-folds`` inside the one
:mod:`spyre_adapters.library._stick_layout_chain` mode that ``head-padding`` 2.6.0 adds its
kinds to, which gives a call only to the modes that rewrite its function, in the same order:
the same rewrites, the same results, fewer Python frames per call. Matching is 2.1's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_folds, _stick_layout, _stick_layout_chain
from spyre_adapters.library.stick_align_v2_1 import KPaddingFolds

__all__ = ["KINDS", "KPaddingChained", "stick_align_padding"]

#: the kinds 2.1 enables besides ``stick-layout``, each with the feature ``stick-align``
KINDS = (_stick_folds.KIND,)


class KPaddingChained(KPaddingFolds):
    """``stick-align-padding`` 2.2 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout.enable(model, edit, "stick-align")
        _stick_layout_chain.enable(model, edit, KINDS, "stick-align")


stick_align_padding = KPaddingChained()
