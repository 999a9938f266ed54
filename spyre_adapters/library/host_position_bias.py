"""Relative position biases computed on the host (gaps ``dtype-cast``, ``embedding``).

T5-style attention (T5, mT5, UMT5, LongT5, Switch Transformers, Pop2Piano, UDOP, Pix2Struct)
turns relative positions into log-spaced buckets (``relative_position.float()``, ``log``,
``min``/``where``) and looks the buckets up in a small ``relative_attention_bias`` embedding,
once per forward. The int-to-float cast does not run on the device before 2026.07 and the
lookup is a host fallback until 2026.08, yet the result depends only on the two lengths.

Matched structurally: modules with a ``compute_bias`` method and a ``relative_attention_bias``
``nn.Embedding``. Each gets a per-instance ``compute_bias`` that runs the stock method on the
host, against a host copy of the bias table taken at prepare time, and moves the finished bias
to the device: one transfer, no cast and no lookup on the device.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["HostPositionBias", "adapter"]

_METHOD = "compute_bias"
_TABLE = "relative_attention_bias"
_MARK = "_spyre_host_position_bias"


class _HostView:
    """The attention module as the stock ``compute_bias`` sees it, with a host bias table."""

    def __init__(self, module: nn.Module, table: nn.Embedding) -> None:
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, _TABLE, table)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_module"), name)


def _host_compute_bias(
    stock: types.FunctionType, table: nn.Embedding
) -> Callable[..., torch.Tensor]:
    signature = inspect.signature(stock)

    def compute_bias(self: nn.Module, *args: Any, **kwargs: Any) -> torch.Tensor:
        weight = getattr(self, _TABLE).weight
        view = _HostView(self, table)
        bound = signature.bind(view, *args, **kwargs)
        asked = bound.arguments.get("device")
        target = torch.device(asked) if asked is not None else weight.device
        if "device" in signature.parameters:
            bound.arguments["device"] = torch.device("cpu")  # the bias is built on the host
        bias: torch.Tensor = stock(*bound.args, **bound.kwargs)
        return bias.to(device=target, dtype=weight.dtype)

    setattr(compute_bias, _MARK, True)
    return compute_bias


class HostPositionBias(TargetedAdapter[tuple[nn.Module, types.FunctionType]]):
    """The ``host-position-bias`` adapter (see the module docstring)."""

    name = "host-position-bias"
    missing = f"no module with {_METHOD}() and a {_TABLE} embedding"

    def targets(self, model: nn.Module) -> list[tuple[nn.Module, types.FunctionType]]:
        found: list[tuple[nn.Module, types.FunctionType]] = []
        for module in model.modules():
            if _METHOD in module.__dict__ or type(module._modules.get(_TABLE)) is not nn.Embedding:
                continue
            stock = getattr(type(module), _METHOD, None)
            if isinstance(stock, types.FunctionType):
                found.append((module, stock))
        return found

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, types.FunctionType]],
    ) -> None:
        for module, stock in targets:
            stock_table = module._modules[_TABLE]
            assert isinstance(stock_table, nn.Embedding)
            table = copy.deepcopy(stock_table).to(device="cpu", dtype=torch.float32)
            method = _host_compute_bias(stock, table)
            edit.set_attr(module, _METHOD, types.MethodType(method, module))


adapter = HostPositionBias()
