"""Cuts of the last dim at an offset, computed as selection matmuls (gaps ``offset-slice`` and
``offset-view-input``): the ``fused-projection-split`` adapter, 2.x.

Until unaligned stick-dim slices land (June 2026), the stack refuses a slice of the last dim
at an offset that is not a whole number of sticks: fused Q|K|V and gate|up projections split
after the matmul, GPT-2's ``Conv1D`` ``c_attn`` split, partial rotary cuts. 1.x replaced fused
projections with separate ``Linear`` layers at prepare time, which showed in the state dict
(``c_attn.weight`` became ``q_proj``/``k_proj``/``v_proj``) and covered only the families it
named. 2.x runs the model's forwards under the ``offset-slice`` feature of
:class:`~spyre_adapters.library._stick_layout.StickLayout`: while the active release refuses
such offsets, each of those cuts becomes a 0/1 selection matmul (exact; nothing of the model
is split). The stack that lowers them still misreads a view that starts inside a row of
its buffer when a copy or an attention reads it, until 2026.09 (``offset-view-input``: packed
Q|K|V gives K and V the values of Q); while it does, every cut of the last dim at a non-zero
offset is computed the same way, so no such view is left to misread. Once the release does
both, the adapter retires. The picks ``x[..., i, :]`` of a packed ``[..., 3, d]`` view (BLOOM,
Persimmon: ``qkv.view(b, s, h, 3, d)[..., 1, :]``) are computed the same way on the flattened
rows; other cuts along inner dims are not rewritten. Matched by structure: any model with a
matmul weight.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._stick_layout import enable

__all__ = ["OffsetSlices", "adapter"]


class OffsetSlices:
    """The ``fused-projection-split`` 2.x adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return any(p.dim() >= 2 and p.is_floating_point() for p in model.parameters())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, "offset-slice")
        enable(model, edit, "offset-view-input")


adapter = OffsetSlices()
