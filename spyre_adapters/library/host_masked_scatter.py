"""``masked_scatter`` injections run on the host (gap ``masked-scatter``).

Vision-language models splice the image features into the text embeddings with
``inputs_embeds.masked_scatter(image_mask, image_features)`` (LLaVA, PaliGemma, Qwen2-VL,
Gemma 3, Idefics, SmolVLM and about a hundred more modeling files). The stack has no
``masked_scatter`` before 2026.08. Matched structurally: every module whose forward (decorators
included) calls ``masked_scatter``.

Each such module gets a bound forward that runs the stock forward inside a
``TorchFunctionMode`` scoped to that call: ``masked_scatter`` (functional, method and in-place)
is computed on the host and its result moved back to the input's device; every other op passes
through untouched. Nothing global is patched and the mode exists only while that forward runs.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import code_mentions, forward_function

__all__ = ["HostMaskedScatter", "HostMaskedScatterMode", "adapter"]

_NAME = "masked_scatter"
_MARK = "_spyre_host_masked_scatter"


class HostMaskedScatterMode(TorchFunctionMode):
    """Computes ``masked_scatter`` on the host while active; everything else passes through."""

    _FUNCTIONAL = frozenset({torch.Tensor.masked_scatter, torch.masked_scatter})

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in self._FUNCTIONAL or func is torch.Tensor.masked_scatter_:
            target = args[0]
            host = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
            result = torch.Tensor.masked_scatter(*host, **kwargs)
            if func is torch.Tensor.masked_scatter_:
                target.copy_(result)  # copy_ moves it to the target's device
                return target
            return result.to(target.device)
        return func(*args, **kwargs)


def _host_forward(stock: types.FunctionType) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with HostMaskedScatterMode():
            return stock(self, *args, **kwargs)

    setattr(forward, _MARK, True)
    return forward


def _targets(model: nn.Module) -> list[tuple[nn.Module, types.FunctionType]]:
    found: list[tuple[nn.Module, types.FunctionType]] = []
    for module in model.modules():
        fn = forward_function(module)
        bound = module.__dict__.get("forward")
        if getattr(getattr(bound, "__func__", None), _MARK, False):
            continue
        if fn is not None and code_mentions(fn, _NAME):
            found.append((module, fn))
    return found


class HostMaskedScatter:
    """The ``host-masked-scatter`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return bool(_targets(model))

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = _targets(model)
        if not targets:
            raise ValueError(
                f"host-masked-scatter does not apply to {type(model).__name__}: "
                "no forward calls masked_scatter"
            )
        for module, fn in targets:
            edit.bind_forward(module, _host_forward(fn))


adapter = HostMaskedScatter()
