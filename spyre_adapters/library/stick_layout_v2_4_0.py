"""``head-padding`` 2.4.0: 2.3.0, and writes through cuts that come with other indices.

2.3.0 (:mod:`spyre_adapters.library.stick_layout_v2_3_0`) reads ``x[head, a:b]`` where the cut
halves a stick dim, but a *write* through such an index (Pixtral's block mask
``mask[start:end, start:end] = 0``, PatchTSMixer's ``mask[b1:b2, :, -n:] = 1``) still stopped
the model at ``sub-stick-head``. 2.4.0 also runs the forwards under
:mod:`spyre_adapters.library._stick_layout_indexed_writes`, which writes the columns into the
view ``x[head, :]`` without cutting the stick dim. Matching and every other rewrite are 2.3.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_indexed_writes
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout_v2_3_0 import HeadLayoutIndexed

__all__ = ["HeadLayoutIndexedWrites", "head_padding"]


class HeadLayoutIndexedWrites(HeadLayoutIndexed):
    """``head-padding`` 2.4.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _stick_layout_indexed_writes.KIND, frozenset({"sub-stick-head"}))


head_padding = HeadLayoutIndexedWrites()
