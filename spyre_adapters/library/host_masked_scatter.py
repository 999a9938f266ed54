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

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._mode_scoped_forward import ModeScopedForward

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


class HostMaskedScatter(ModeScopedForward):
    """The ``host-masked-scatter`` adapter (see the module docstring)."""

    name = "host-masked-scatter"
    missing = "no forward calls masked_scatter"
    mode = HostMaskedScatterMode
    mark = _MARK
    calls = _NAME


adapter = HostMaskedScatter()
