"""``head-padding`` 2.1: the 2.0 rewrites, with writes into rewritten cuts kept.

2.0 (:mod:`spyre_adapters.library.stick_layout`) computes a cut that halves a head narrower
than two sticks as a selection matmul, a copy where the stock cut is a view, so a write into the
cut was lost (multi-head latent attention fills its keys that way: a silent wrong answer). 2.1
also runs the forwards under :mod:`spyre_adapters.library._cut_writes`, which sends such writes
back into the tensor the cut came from. Matching is 2.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _cut_writes
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout import HeadLayout

__all__ = ["HeadLayoutWrites", "head_padding"]


class HeadLayoutWrites(HeadLayout):
    """``head-padding`` 2.1 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _cut_writes.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutWrites()
