"""``head-padding`` 2.1.1: 2.1, whose write tracking also works under ``torch.vmap``.

2.1 (:mod:`spyre_adapters.library.stick_layout_v2_1`) runs the forwards under
:mod:`spyre_adapters.library._cut_writes`, which asked every cut for its storage; a cut taken
under ``torch.vmap`` has none, so the forward failed ("Cannot access storage of
BatchedTensorImpl": Transformers' FlexAttention mask, built under nested ``vmap``). 2.1.1 runs
them under :mod:`spyre_adapters.library._cut_writes_v2` instead. Matching and rewrites are
2.1's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _cut_writes_v2
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout import HeadLayout

__all__ = ["HeadLayoutWritesUnwrapped", "head_padding"]


class HeadLayoutWritesUnwrapped(HeadLayout):
    """``head-padding`` 2.1.1 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _cut_writes_v2.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutWritesUnwrapped()
