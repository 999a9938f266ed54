"""Conv padding sizes of audio codecs computed on the host (gap ``fp32-storage``).

EnCodec's ``EncodecConv1d`` (and its copies: Mimi, and in recent Transformers PocketTTS's audio
tokenizer and WavTokenizer) pads each input so that a whole number of frames fits, with a size
computed from three 0-d int64 buffers (``stride``, ``kernel_size``, ``padding_total``)::

    n_frames = (length - kernel_size + padding_total) / stride + 1   # true division: float32
    n_frames = ceil(n_frames).to(int64) - 1
    extra    = n_frames * stride + kernel_size - padding_total - length

The buffers follow the model to the device, so the quotient is a device float, stored as DL16
(10 significant bits: from 1024 on, only even values; from 2048 on, multiples of 4). For a few
thousand samples ``ceil`` then sees a rounded quotient and the padding is off by a few samples
(a 4000-sample EnCodec input reaches ``encoder.layers.3`` as 4006 samples instead of 4002 and the
residual add fails). The size depends only on the input's length and the constants.

Matched structurally: modules with a ``_get_extra_padding_for_conv1d`` method whose code reads
0-d integer buffers of the module. Each gets a per-instance ``_get_extra_padding_for_conv1d``
that runs the stock method's code against host copies of those buffers (the rest of the module
seen as is), so the float32 arithmetic runs on the host exactly as on the CPU model; it returns
the stock result, a 0-d int64 tensor, on the host, which ``F.pad`` and the device additions take
as a scalar. The copies are taken at apply time: the buffers are constants set in ``__init__``
and non-persistent, so no checkpoint load changes them, and a forward then reads no buffer back
from the device. Buffers, state dict and outputs are unchanged.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["HostConvPadding", "adapter"]

_METHOD = "_get_extra_padding_for_conv1d"
_MARK = "_spyre_host_conv_padding"

_Target = tuple[nn.Module, types.FunctionType, tuple[str, ...]]


class _HostView:
    """The conv module as the stock method sees it, with host copies of its 0-d buffers."""

    def __init__(self, module: nn.Module, host: Mapping[str, torch.Tensor]) -> None:
        object.__setattr__(self, "_module", module)
        for name, value in host.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_module"), name)


def _is_integer_scalar(value: torch.Tensor | None) -> bool:
    if value is None or value.dim() != 0:
        return False
    dtype = value.dtype
    return not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)


def _host_padding(
    stock: types.FunctionType, host: Mapping[str, torch.Tensor]
) -> Callable[..., Any]:
    def _get_extra_padding_for_conv1d(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return stock(_HostView(self, host), *args, **kwargs)

    setattr(_get_extra_padding_for_conv1d, _MARK, True)
    return _get_extra_padding_for_conv1d


class HostConvPadding(TargetedAdapter[_Target]):
    """The ``host-conv-padding`` adapter (see the module docstring)."""

    name = "host-conv-padding"
    missing = f"no module with {_METHOD}() reading 0-d integer buffers"

    def targets(self, model: nn.Module) -> list[_Target]:
        found: list[_Target] = []
        for module in model.modules():
            if _METHOD in module.__dict__:
                continue
            stock = getattr(type(module), _METHOD, None)
            if not isinstance(stock, types.FunctionType):
                continue
            names = tuple(
                name
                for name, buffer in module._buffers.items()
                if _is_integer_scalar(buffer) and code_mentions(stock, name)
            )
            if names:
                found.append((module, stock, names))
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[_Target]) -> None:
        for module, stock, names in targets:
            host: dict[str, torch.Tensor] = {}
            for name in names:
                buffer = module._buffers[name]
                assert buffer is not None
                host[name] = buffer.detach().to(device="cpu", copy=True)
            method = _host_padding(stock, host)
            edit.set_attr(module, _METHOD, types.MethodType(method, module))


adapter = HostConvPadding()
