"""``layernorm-two-pass`` 2.0.1: 2.0.0's two-pass LayerNorm with fp32 statistics, without a
copy of its input.

2.0.0 (:mod:`spyre_adapters.library.layer_norm_stats_v2_0_0`) copies its input to contiguous
memory before the fp32 upcast; for a view that starts inside a row of its buffer (GroupViT's
and Hiera's token slices) that copy is what the device miscompiles at 2026.07 and 2026.08 (gap
``offset-view-input``), where the stock LayerNorm makes no copy. This version upcasts the input
as it is (a cast, which the device does not miscompile so) and makes the result contiguous.
Matching is 1.0.1's; the numbers are 2.0.0's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.layer_norm_stats import LayerNormTwoPass

__all__ = ["LayerNormTwoPassFp32Uncopied", "adapter"]

_DEFAULT_EPS = 1e-5


def _two_pass_fp32(eps_name: str | None) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name) if eps_name is not None else _DEFAULT_EPS
        dtype = input.dtype
        x = input.to(torch.float32)  # the statistics in fp32; no copy of the input as such
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        normed = centred * torch.rsqrt(variance + eps)
        weight = self._parameters.get("weight")
        bias = self._parameters.get("bias")
        if weight is not None:
            normed = normed * weight.to(torch.float32)
        if bias is not None:
            normed = normed + bias.to(torch.float32)
        return normed.to(dtype).contiguous()  # like the fused kernel's output

    return forward


class LayerNormTwoPassFp32Uncopied(LayerNormTwoPass):
    """The ``layernorm-two-pass`` 2.0.1 adapter (see the module docstring)."""

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, tuple[str | None, int]]],
    ) -> None:
        for module, (eps_name, _width) in targets:
            edit.bind_forward(module, _two_pass_fp32(eps_name))


adapter = LayerNormTwoPassFp32Uncopied()
