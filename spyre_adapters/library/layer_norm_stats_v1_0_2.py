"""``layernorm-two-pass`` 1.0.2: 1.0.1's two-pass LayerNorm at the input dtype, without a copy
of its input.

1.0.1 (:mod:`spyre_adapters.library.layer_norm_stats`) copies its input to contiguous memory
first, so that its output is contiguous like the fused kernel's. When the input is a view that
starts inside a row of the buffer it was cut from (GroupViT and Hiera normalise token slices
such as ``x[:, 1:]``), that copy is what the device miscompiles from 2026.05 to 2026.08 (gap
``offset-view-input``: the copy reads from the start of the row), where the stock LayerNorm
makes no copy. This version computes the statistics on the input as it is and makes the
*result* contiguous (a fresh tensor, never such a view). Matching is 1.0.1's; the numbers are
1.0.1's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.layer_norm_stats import LayerNormTwoPass

__all__ = ["LayerNormTwoPassUncopied", "adapter"]

_DEFAULT_EPS = 1e-5


def _two_pass(eps_name: str | None) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name) if eps_name is not None else _DEFAULT_EPS
        mean = input.mean(dim=-1, keepdim=True)
        centred = input - mean  # a fresh tensor: the input itself is never copied
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        normed = centred * torch.rsqrt(variance + eps)
        weight = self._parameters.get("weight")
        bias = self._parameters.get("bias")
        if weight is not None:
            normed = normed * weight
        if bias is not None:
            normed = normed + bias
        return normed.contiguous()  # like the fused kernel's output, for any input layout

    return forward


class LayerNormTwoPassUncopied(LayerNormTwoPass):
    """The ``layernorm-two-pass`` 1.0.2 adapter (see the module docstring)."""

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, tuple[str | None, int]]],
    ) -> None:
        for module, (eps_name, _width) in targets:
            edit.bind_forward(module, _two_pass(eps_name))


adapter = LayerNormTwoPassUncopied()
