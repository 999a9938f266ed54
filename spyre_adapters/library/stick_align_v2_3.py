"""``stick-align-padding`` 2.3: 2.2's rewrites in the chain ``head-padding`` 2.7.0 uses.

2.2 (:mod:`spyre_adapters.library.stick_align_v2_2`) enables ``stick-layout-folds`` inside the
``stick-layout-chain`` mode, where ``head-padding`` 2.6.0 adds its kinds. ``head-padding``
2.7.0 adds them to ``stick-layout-chain-2``
(:mod:`spyre_adapters.library._stick_layout_chain_v2`); 2.3 enables ``stick-layout-folds``
there too, so the two adapters keep sharing one mode. The same rewrites, in the same order,
with the same results; matching is 2.2's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout, _stick_layout_chain_v2
from spyre_adapters.library.stick_align_v2_2 import KINDS, KPaddingChained

__all__ = ["KINDS", "KPaddingChainedV2", "stick_align_padding"]


class KPaddingChainedV2(KPaddingChained):
    """``stick-align-padding`` 2.3 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout.enable(model, edit, "stick-align")
        _stick_layout_chain_v2.enable(model, edit, KINDS, "stick-align")


stick_align_padding = KPaddingChainedV2()
