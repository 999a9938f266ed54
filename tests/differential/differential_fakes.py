"""Deliberately wrong adapters, to show that differential runs catch what they must catch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit


class _Negated(nn.Module):
    def __init__(self, inner: nn.Module, device_only: bool) -> None:
        super().__init__()
        self.inner = inner
        self.device_only = device_only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.inner(x)
        if self.device_only and x.device.type != "spyre":
            return out
        return -out


class NegatedFinalNorm:
    """Changes the math: the final norm's output is negated (every logit flips sign); with
    ``device_only``, only on the device (the CPU run of the adapted model is right)."""

    def __init__(self, device_only: bool = False) -> None:
        self.device_only = device_only

    def matches(self, model: nn.Module) -> bool:
        return any(path.endswith("model.norm") for path, _ in model.named_modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        for path, module in list(model.named_modules()):
            if path.endswith("model.norm"):
                edit.replace_module(path, _Negated(module, self.device_only))


class _StridedKeys(TorchFunctionMode):
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is nn.functional.scaled_dot_product_attention:
            q, k, *rest = args
            # the same values in a transposed memory layout: a non-contiguous view
            k = k.transpose(-1, -2).contiguous().transpose(-1, -2)
            args = (q, k, *rest)
        return func(*args, **(kwargs or {}))


class StridedKeys:
    """Keeps the math, but hands SDPA a non-contiguous key (what the device miscompiles
    before 2026.07)."""

    def matches(self, model: nn.Module) -> bool:
        return any(type(m).__name__.endswith("Attention") for m in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        for module in model.modules():
            if type(module).__name__.endswith("Attention"):
                stock = module.forward

                def forward(self: nn.Module, *args: Any, _stock: Any = stock, **kw: Any) -> Any:
                    with _StridedKeys():
                        return _stock(*args, **kw)

                edit.bind_forward(module, forward)


class _FailsOnDevice(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "spyre":
            raise RuntimeError("a buffer sized from a wrong value cannot be allocated")
        out: torch.Tensor = self.inner(x)
        return out


class StridedKeysThenFails(StridedKeys):
    """:class:`StridedKeys`, and the final norm fails on the device with a plain error (what a
    miscompiled value can cause downstream)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        super().apply(model, edit)
        for path, module in list(model.named_modules()):
            if path.endswith("model.norm"):
                edit.replace_module(path, _FailsOnDevice(module))


negated_final_norm = NegatedFinalNorm()
negated_on_device = NegatedFinalNorm(device_only=True)
strided_keys = StridedKeys()
strided_keys_then_fails = StridedKeysThenFails()
