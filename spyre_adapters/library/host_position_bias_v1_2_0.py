"""Relative position biases computed on the host (gaps ``dtype-cast``, ``embedding``),
version 1.2.0.

1.1.0 with one change: the bias table is read through
:func:`~spyre_adapters.library._held_weights.host_weight`, so that a table accelerate has
offloaded (``from_pretrained(..., device_map=...)`` with too little device memory,
``cpu_offload``) is brought in by its own hook for the read. 1.1.0 read ``table.weight``
directly; the stock model never reads it outside the table's own forward, the adapter does, and
an offloaded table is on the ``meta`` device there: a T5 loaded with offloaded weights stopped
with "Cannot copy out of meta tensor" at every release where the adapter applies.
"""

from __future__ import annotations

import types
from typing import cast

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import host_position_bias as base
from spyre_adapters.library._held_weights import host_weight
from spyre_adapters.library.host_position_bias_v1_1_0 import _LiveTable, _Target

__all__ = ["HostPositionBiasHeld", "adapter"]


class _HeldTable(_LiveTable):
    """1.1.0's live table, read through the table's hook when it is offloaded."""

    @property
    def weight(self) -> torch.Tensor:
        table = self._module._modules[base._TABLE]
        assert isinstance(table, nn.Embedding)
        return host_weight(table)


class HostPositionBiasHeld(base.HostPositionBias):
    """The ``host-position-bias`` adapter, version 1.2.0 (see the module docstring)."""

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[_Target]) -> None:
        for module, stock in targets:
            method = base._host_compute_bias(stock, cast(nn.Embedding, _HeldTable(module)))
            edit.set_attr(module, base._METHOD, types.MethodType(method, module))


adapter = HostPositionBiasHeld()
