"""Relative position biases computed on the host (gaps ``dtype-cast``, ``embedding``),
version 1.1.0.

The same modules and the same host computation as 1.0.0 (the stock ``compute_bias`` run on
the host, the finished bias moved to the device in one transfer), with one change: the bias
table is the one the module holds at each call. 1.0.0 looked buckets up in a host copy of the
``relative_attention_bias`` table taken at prepare time, so a table loaded after ``prepare``
(``load_state_dict``, an in-place initialisation) never reached the attention: a tiny T5
prepared, then given other weights, gave hidden states at cosine 0.998 from the stock model's,
at every release where the adapter applies. Each call now moves the table ([buckets, heads],
a few hundred numbers) to the host as float32, as 1.0.0's copy was.
"""

from __future__ import annotations

import types
from typing import cast

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.host_position_bias import (
    _METHOD,
    _TABLE,
    HostPositionBias,
    _host_compute_bias,
)

__all__ = ["HostPositionBiasLive", "adapter"]

_Target = tuple[nn.Module, types.FunctionType]  # an attention module and its stock method


class _LiveTable:
    """The attention module's bias table as it is now, on the host: what the stock
    ``compute_bias`` calls and reads (``table(buckets)``, ``table.weight``)."""

    def __init__(self, module: nn.Module) -> None:
        self._module = module

    @property
    def weight(self) -> torch.Tensor:
        table = self._module._modules[_TABLE]
        assert isinstance(table, nn.Embedding)
        return table.weight.detach().to(device="cpu", dtype=torch.float32)

    def __call__(self, buckets: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(buckets, self.weight)


class HostPositionBiasLive(HostPositionBias):
    """The ``host-position-bias`` adapter, version 1.1.0 (see the module docstring)."""

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[_Target]) -> None:
        for module, stock in targets:
            method = _host_compute_bias(stock, cast(nn.Embedding, _LiveTable(module)))
            edit.set_attr(module, _METHOD, types.MethodType(method, module))


adapter = HostPositionBiasLive()
