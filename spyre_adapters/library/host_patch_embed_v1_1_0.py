"""Patch-embedding convolutions run on the host (gap ``conv2d``), version 1.1.0.

The same modules as 1.0.0 (every ``nn.Conv2d``/``nn.Conv3d`` whose kernel equals its stride,
no dilation, no groups), the same two transfers of activations: pixels in, patches out. Two
things change, each a defect of 1.0.0 measured on the CPU:

- **The weights are the module's, at each call.** 1.0.0 convolved with a host copy taken at
  prepare time, so weights loaded after ``prepare`` (``load_state_dict``, an in-place
  initialisation) never reached the patches: a tiny ViT prepared, then given other weights,
  gave last hidden states at cosine -0.15 from the stock model's. Each call now reads the
  weight and bias the module holds and moves them to the host with the pixels (on the device,
  a transfer of the weight per call, which is what a host fallback of the convolution costs).
- **The sums run in float64.** The host's fp32 kernel adds a patch's products in an order that
  depends on the batch (it picks another algorithm for 13 images than for one), and a result
  one fp32 ulp apart lands, now and then, on the other side of a DL16 rounding boundary: with
  DL16 pixels and weights, some patch of a 13-image batch differed by one DL16 step from the
  same image alone in 30 of 30 draws, which failed Transformers' batching-equivalence test of
  ViT at 2026.05 in about half of its runs. The products of DL16 values (9 fraction bits) are
  exact in float64, and so are the sums of a patch's few dozen of them, so a patch no longer
  depends on its batch (0 of 30 draws); the result is rounded once, to the input's dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._targeted_adapter import TargetedAdapter
from spyre_adapters.library.host_patch_embed import _is_patchify

__all__ = ["HostPatchEmbedExact", "adapter"]

Patchify = nn.Conv2d | nn.Conv3d


def _on_host(value: torch.Tensor) -> torch.Tensor:
    return value.detach().to(device="cpu", dtype=torch.float64)


def _host_forward(module: Patchify) -> Callable[..., torch.Tensor]:
    convolve: Callable[..., torch.Tensor] = (
        nn.functional.conv2d if isinstance(module, nn.Conv2d) else nn.functional.conv3d
    )

    def forward(self: Patchify, input: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else _on_host(self.bias)
        patches = convolve(
            _on_host(input), _on_host(self.weight), bias,
            self.stride, self.padding, self.dilation, self.groups,
        )  # fmt: skip
        return patches.to(device=input.device, dtype=input.dtype)

    return forward


class HostPatchEmbedExact(TargetedAdapter[Patchify]):
    """The ``host-patch-embed`` adapter, version 1.1.0 (see the module docstring)."""

    name = "host-patch-embed"
    missing = "no Conv2d/Conv3d with kernel_size == stride"

    def targets(self, model: nn.Module) -> list[Patchify]:
        return [m for m in model.modules() if isinstance(m, Patchify) and _is_patchify(m)]

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[Patchify]) -> None:
        for module in targets:
            edit.bind_forward(module, _host_forward(module))


adapter = HostPatchEmbedExact()
