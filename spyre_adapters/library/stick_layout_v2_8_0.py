"""``head-padding`` 2.8.0: 2.7.0's rewrites, with infinities and NaN kept where the stock op keeps
them.

2.7.0 (:mod:`spyre_adapters.library.stick_layout_v2_7_0`) computes a refused cut or head split
of the stick dim as a 0/1 selection or placement matmul, and ``0 * inf`` is NaN: DeepSeek-V4's
``block_bias = new_full(..., -inf)`` cut to ``[..., :compressed_len]`` came back NaN in every
row with host numerics (functional mode), and a NaN the device computes spread over its row in
either mode. 2.8.0 enables the same features in the kinds of
:mod:`spyre_adapters.library._stick_layout_exact`, which make the same rewrites with the exact
products of :mod:`spyre_adapters.library._exact_selection`: bit-identical results on finite
inputs, the stock non-finite elements otherwise. Matching is 2.7.0's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_exact
from spyre_adapters.library.stick_layout_v2_7_0 import KINDS, HeadLayoutViewsAs

__all__ = ["KINDS", "HeadLayoutExact", "head_padding"]


class HeadLayoutExact(HeadLayoutViewsAs):
    """``head-padding`` 2.8.0 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout_exact.enable(model, edit, "sub-stick-head")
        _stick_layout_exact.enable_chain(model, edit, KINDS, "sub-stick-head")


head_padding = HeadLayoutExact()
