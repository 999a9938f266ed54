"""``layernorm-two-pass`` 1.0.2 and 2.0.1: the two-pass LayerNorm of 1.0.1 (statistics at the
input dtype) and of 2.0.0 (statistics in fp32), without a copy of the input.

1.0.1 (:mod:`spyre_adapters.library.layer_norm_stats`) and 2.0.0
(:mod:`spyre_adapters.library.layer_norm_stats_v2_0_0`) copy their input to contiguous memory
first, so that the output is contiguous like the fused kernel's. When the input is a view that
starts inside a row of the buffer it was cut from (GroupViT and Hiera normalise token slices
such as ``x[:, 1:]``), that copy is what the device miscompiles from 2026.05 to 2026.08 (gap
``offset-view-input``: the copy reads from the start of the row), where the stock LayerNorm
makes no copy. These versions compute on the input as it is (2.0.1 upcasts it: a cast, which
the device does not misread so) and make the *result* contiguous (a fresh tensor, never such
a view). Matching is 1.0.1's; the numbers are those of the version each follows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.layer_norm_stats import LayerNormTwoPass

__all__ = ["LayerNormTwoPassUncopied", "fp32_statistics", "input_dtype"]

_DEFAULT_EPS = 1e-5


def _two_pass(eps_name: str | None, fp32: bool) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name) if eps_name is not None else _DEFAULT_EPS
        x = input.to(torch.float32) if fp32 else input  # the input itself is never copied
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        normed = centred * torch.rsqrt(variance + eps)
        weight = self._parameters.get("weight")
        bias = self._parameters.get("bias")
        if weight is not None:
            normed = normed * (weight.to(torch.float32) if fp32 else weight)
        if bias is not None:
            normed = normed + (bias.to(torch.float32) if fp32 else bias)
        if fp32:
            normed = normed.to(input.dtype)
        return normed.contiguous()  # like the fused kernel's output, for any input layout

    return forward


class LayerNormTwoPassUncopied(LayerNormTwoPass):
    """``layernorm-two-pass`` 1.0.2 (``fp32=False``) or 2.0.1 (see the module docstring)."""

    def __init__(self, *, fp32: bool) -> None:
        self.fp32 = fp32

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, tuple[str | None, int]]],
    ) -> None:
        for module, (eps_name, _width) in targets:
            edit.bind_forward(module, _two_pass(eps_name, self.fp32))


input_dtype = LayerNormTwoPassUncopied(fp32=False)
"""1.0.2: statistics at the input dtype, as 1.0.1."""
fp32_statistics = LayerNormTwoPassUncopied(fp32=True)
"""2.0.1: statistics in fp32, as 2.0.0."""
