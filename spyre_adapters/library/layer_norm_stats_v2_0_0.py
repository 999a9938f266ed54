"""``layernorm-two-pass`` 2.0.0: the two-pass LayerNorm with its statistics in fp32, for the
stacks that hold fp32 inside norms (from 2026.07; gap ``layernorm-nan``).

Up to 2026.06 an fp32 upcast on the device is itself a gap (``dtype-cast``), so 1.x computes
the mean and the centred variance at the input dtype. From 2026.07 the stack runs the fp16 to
fp32 upcast inside a norm (the stock RMSNorm runs unmodified there), and the fused LayerNorm
still returns NaN on near-constant rows, so this version keeps the two-pass form but computes
it as the fused kernel does: the input, weight and bias taken to fp32, the statistics,
normalisation and affine step in fp32, the result cast back to the input dtype. In fp16 that
gives the stock module's numbers (the CPU kernel accumulates in fp32 too) where 1.x rounds its
statistics to fp16; in fp32 nothing changes. Which modules are matched, and how, is exactly as
in 1.0.1 (:mod:`spyre_adapters.library.layer_norm_stats`, whose matching this version reuses).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.layer_norm_stats import LayerNormTwoPass

__all__ = ["LayerNormTwoPassFp32Stats", "adapter"]

_DEFAULT_EPS = 1e-5


def _two_pass_fp32(eps_name: str | None) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name) if eps_name is not None else _DEFAULT_EPS
        dtype = input.dtype
        # contiguous like the fused kernel's output (see 1.0.1), statistics in fp32
        x = input.contiguous().to(torch.float32)
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
        return normed.to(dtype)

    return forward


class LayerNormTwoPassFp32Stats(LayerNormTwoPass):
    """The ``layernorm-two-pass`` 2.0.0 adapter (see the module docstring)."""

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, tuple[str | None, int]]],
    ) -> None:
        for module, (eps_name, _width) in targets:
            edit.bind_forward(module, _two_pass_fp32(eps_name))


adapter = LayerNormTwoPassFp32Stats()
