"""Patch-embedding convolutions run on the host (gap ``conv2d``).

Vision towers turn an image into patch embeddings with a convolution whose kernel equals its
stride (ViT, CLIP, SigLIP, DINOv2, DeiT, and the vision towers of VLMs; ``Conv3d`` for
video-capable towers). Before 2026.06 the stack has no convolution. Matched structurally: every
``nn.Conv2d``/``nn.Conv3d`` with ``kernel_size == stride``, no dilation and no groups.

Each gets a bound forward that moves the pixels to the host, convolves with a host copy of the
weights taken at prepare time (so the weights are never shipped back per call), and moves the
patches to the input's device: two transfers, no convolution on the device. Overlapping
convolutions (ConvNeXt stages, audio front ends) are not patch embeddings and are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit

__all__ = ["HostPatchEmbed", "adapter"]

_HOST_WEIGHT = "spyre_host_weight"
_HOST_BIAS = "spyre_host_bias"


def _is_patchify(module: nn.Module) -> bool:
    if type(module) not in (nn.Conv2d, nn.Conv3d) or "forward" in module.__dict__:
        return False
    assert isinstance(module, (nn.Conv2d, nn.Conv3d))
    return (
        tuple(module.kernel_size) == tuple(module.stride)
        and all(d == 1 for d in module.dilation)
        and module.groups == 1
        and module.padding_mode == "zeros"
    )


def _host_forward(module: nn.Conv2d | nn.Conv3d) -> Callable[..., torch.Tensor]:
    functional: Callable[..., torch.Tensor] = (
        nn.functional.conv2d if isinstance(module, nn.Conv2d) else nn.functional.conv3d
    )

    def forward(self: nn.Conv2d | nn.Conv3d, input: torch.Tensor) -> torch.Tensor:
        weight: torch.Tensor = getattr(self, _HOST_WEIGHT)
        bias: torch.Tensor | None = getattr(self, _HOST_BIAS)
        pixels = input.cpu().to(weight.dtype)  # host side: one transfer in
        patches = functional(
            pixels, weight, bias, self.stride, self.padding, self.dilation, self.groups
        )
        return patches.to(device=input.device, dtype=input.dtype)  # and one out

    return forward


class HostPatchEmbed:
    """The ``host-patch-embed`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return any(_is_patchify(m) for m in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = [m for m in model.modules() if _is_patchify(m)]
        if not targets:
            raise ValueError(
                f"host-patch-embed does not apply to {type(model).__name__}: no Conv2d/Conv3d "
                "with kernel_size == stride"
            )
        for module in targets:
            assert isinstance(module, (nn.Conv2d, nn.Conv3d))
            weight = module.weight.detach().to("cpu", copy=True)
            bias = None if module.bias is None else module.bias.detach().to("cpu", copy=True)
            edit.set_attr(module, _HOST_WEIGHT, weight)
            edit.set_attr(module, _HOST_BIAS, bias)
            edit.bind_forward(module, _host_forward(module))


adapter = HostPatchEmbed()
