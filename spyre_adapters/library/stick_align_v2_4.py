"""``stick-align-padding`` 2.4: 2.3's rewrites in the kinds ``head-padding`` 2.8.0 uses.

2.3 (:mod:`spyre_adapters.library.stick_align_v2_3`) enables the feature ``stick-align`` in the
first generation's kinds (``stick-layout`` and ``stick-layout-chain-2``); ``head-padding``
2.8.0 enables its features in :mod:`spyre_adapters.library._stick_layout_exact`, whose
selections keep infinities and NaN. 2.4 enables ``stick-align`` there too, so a model adapted
by both runs under one mode and one chain, as with 2.3 and 2.7.0. Its own rewrites (operands
zero-padded along K) are unchanged: they never multiply an element by 0 that the stock product
does not. Matching is 2.3's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_exact
from spyre_adapters.library.stick_align_v2_3 import KINDS, KPaddingChainedV2

__all__ = ["KINDS", "KPaddingExact", "stick_align_padding"]


class KPaddingExact(KPaddingChainedV2):
    """``stick-align-padding`` 2.4 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout_exact.enable(model, edit, "stick-align")
        _stick_layout_exact.enable_chain(model, edit, KINDS, "stick-align")


stick_align_padding = KPaddingExact()
