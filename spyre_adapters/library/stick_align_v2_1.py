"""``stick-align-padding`` 2.1: the 2.0 padding, for every matmul PyTorch folds into ``mm``.

2.0 (:mod:`spyre_adapters.library.stick_layout`) pads the reduction dim of a ``torch.matmul``
when one operand is 2-D, the case it judged to reach ``mm``. PyTorch also folds a 3-D operand
times a 3-D one of batch 1 (Parakeet's, Nemotron ASR's and Cohere ASR's relative-position outer
products, K = 1), which 2.0 left to the device to refuse. 2.1 also runs the forwards under
:mod:`spyre_adapters.library._stick_folds`, which asks PyTorch which op a matmul reaches.
Matching is 2.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_folds
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library.stick_layout import KPadding

__all__ = ["KPaddingFolds", "stick_align_padding"]


class KPaddingFolds(KPadding):
    """``stick-align-padding`` 2.1 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        enable_kind(model, edit, _stick_folds.KIND, frozenset({"stick-align"}))


stick_align_padding = KPaddingFolds()
