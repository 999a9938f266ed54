"""``host-conv-padding`` 1.1: 1.0's padding, and the conv output lengths, computed on the host.

1.0 (:mod:`spyre_adapters.library.host_conv_padding`) runs EnCodec-style
``_get_extra_padding_for_conv1d`` against host copies of the conv's 0-d int64 buffers. Mimi's
convs have a second method with the same float32 quotient, ``_get_output_length(input_length)``,
which Mimi's ``get_encoded_length`` chains over every conv of the encoder to turn the lengths of a
``padding_mask`` into the lengths of the audio codes (Moshi and Kyutai's speech-to-text build
their code masks with it). There the lengths themselves are device tensors, so host buffers alone
do not help: ``(length - kernel_size + padding_total) / stride`` is a device float stored as DL16,
and a 2049-sample input was given 128 frames instead of 129, a 16000-sample one 1002 instead of
1000, with no error.

1.1 matches modules whose class has either method reading 0-d integer buffers of the module, and
gives each such method a per-instance replacement that runs the stock code on the host:

- the 0-d integer buffers it reads are host copies taken at apply time (constants set in
  ``__init__``, non-persistent: no checkpoint load changes them);
- integer tensor arguments (lengths: the values the method computes with) are copied to the host,
  and a tensor result goes back to the device those arguments were on;
- floating tensor arguments (the hidden states ``_get_extra_padding_for_conv1d`` reads the length
  of) are passed as they are, and the result then stays on the host, as in 1.0.

The float32 arithmetic is the CPU's, the results are the stock results (dtype, shape, values).
Buffers, state dict and outputs are unchanged. Unlike 1.0 it sets no marker attribute on the
replacement: a replacement in the instance's ``__dict__`` is what tells an adapted module apart.
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

__all__ = ["HostConvLengths", "adapter"]

#: The methods of EnCodec-style convs that compute sizes from the conv's 0-d integer buffers.
METHODS = ("_get_extra_padding_for_conv1d", "_get_output_length")

_Target = tuple[nn.Module, str, types.FunctionType, tuple[str, ...]]


class _HostView:
    """The conv module as the stock method sees it, with host copies of its 0-d buffers."""

    def __init__(self, module: nn.Module, host: Mapping[str, torch.Tensor]) -> None:
        object.__setattr__(self, "_module", module)
        for name, value in host.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_module"), name)


def _is_integer(value: Any) -> bool:
    if not isinstance(value, torch.Tensor):
        return False
    dtype = value.dtype
    return not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)


def _is_integer_scalar(value: torch.Tensor | None) -> bool:
    return value is not None and value.dim() == 0 and _is_integer(value)


def _to_host(value: Any, devices: list[torch.device]) -> Any:
    """``value`` with its integer tensor off the host copied to the host (their device noted)."""
    if _is_integer(value) and value.device.type != "cpu":
        devices.append(value.device)
        return value.detach().to("cpu")
    return value


def _back(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_back(v, device) for v in value)
    return value


def _on_host(stock: types.FunctionType, host: Mapping[str, torch.Tensor]) -> Callable[..., Any]:
    def method(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        devices: list[torch.device] = []
        host_args = [_to_host(a, devices) for a in args]
        host_kwargs = {k: _to_host(v, devices) for k, v in kwargs.items()}
        result = stock(_HostView(self, host), *host_args, **host_kwargs)
        return _back(result, devices[0]) if devices else result

    method.__name__ = method.__qualname__ = stock.__name__
    method.__doc__ = stock.__doc__
    return method


class HostConvLengths(TargetedAdapter[_Target]):
    """The ``host-conv-padding`` adapter, version 1.1 (see the module docstring)."""

    name = "host-conv-padding"
    missing = f"no module with {' or '.join(m + '()' for m in METHODS)} reading 0-d integer buffers"

    def targets(self, model: nn.Module) -> list[_Target]:
        found: list[_Target] = []
        for module in model.modules():
            scalars = [n for n, b in module._buffers.items() if _is_integer_scalar(b)]
            if not scalars:
                continue
            for method in METHODS:
                if method in module.__dict__:
                    continue
                stock = getattr(type(module), method, None)
                if not isinstance(stock, types.FunctionType):
                    continue
                names = tuple(n for n in scalars if code_mentions(stock, n))
                if names:
                    found.append((module, method, stock, names))
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[_Target]) -> None:
        copies: dict[tuple[int, str], torch.Tensor] = {}
        for module, method, stock, names in targets:
            host: dict[str, torch.Tensor] = {}
            for name in names:
                key = (id(module), name)
                if key not in copies:
                    buffer = module._buffers[name]
                    assert buffer is not None
                    copies[key] = buffer.detach().to(device="cpu", copy=True)
                host[name] = copies[key]
            edit.set_attr(module, method, types.MethodType(_on_host(stock, host), module))


adapter = HostConvLengths()
