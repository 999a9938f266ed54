"""``layernorm-two-pass`` 1.0.0, as released: LayerNorm with explicit two-pass statistics at
the input dtype, instead of the fused kernel (gap ``layernorm-nan``).

Kept, unchanged, for the locks that pin 1.0.0; 1.0.1 (:mod:`spyre_adapters.library.
layer_norm_stats`) and, from 2026.07, 2.0.0 supersede it at every release. Its known defect: for a permuted input the
output keeps the permuted strides where the fused kernel returns a contiguous tensor, so a model
that ``.view``s the result (GraniteDocling's pixel shuffle) fails; 1.0.1 returns a contiguous
tensor.

The fused LayerNorm of the stack returns NaN on near-constant rows: a one-pass variance
(``E[x^2] - E[x]^2``) cancels to a small negative number and its square root is NaN. The bound
forward computes the mean, then the variance of the centred values (``(x - mean) * (x - mean)``,
never negative, no ``pow``), normalises, and applies weight and bias. It stays at the input
dtype: an fp32 upcast on the device is itself a gap (``dtype-cast``) until 2026.07, and the
two-pass form needs no extra precision to stay finite.

Matched by type and by behaviour: every ``nn.LayerNorm``, and any module named ``*LayerNorm``
with a one-argument forward, an optional 1-D weight and bias and an epsilon (attribute
``eps``/``variance_epsilon``/``epsilon`` or the default 1e-5) whose output equals this
computation on a random probe (OLMo's parameter-free ``OlmoLayerNorm``, Cohere's bias-free
``CohereLayerNorm``). In fp32 the results agree with the stock modules to rounding.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._norm_probe import agreeing_form, seeded_probe
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["LayerNormTwoPass", "adapter"]

_EPS_NAMES = ("eps", "variance_epsilon", "epsilon")
_DEFAULT_EPS = 1e-5


def _two_pass(eps_name: str | None, width: int) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name) if eps_name is not None else _DEFAULT_EPS
        mean = input.mean(dim=-1, keepdim=True)
        centred = input - mean
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        normed = centred * torch.rsqrt(variance + eps)
        weight = self._parameters.get("weight")
        bias = self._parameters.get("bias")
        if weight is not None:
            normed = normed * weight
        if bias is not None:
            normed = normed + bias
        return normed

    return forward


def _width(module: nn.Module) -> int | None:
    weight = module._parameters.get("weight")
    if weight is not None:
        return int(weight.numel()) if weight.dim() == 1 else None
    shape = getattr(module, "normalized_shape", None)
    if isinstance(shape, (tuple, list)) and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def _one_argument_forward(module: nn.Module) -> bool:
    try:
        params = list(inspect.signature(type(module).forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return len(params) == 1 and params[0].default is inspect.Parameter.empty


def _form(module: nn.Module) -> tuple[str | None, int] | None:
    """``(eps attribute or None for the default, width)`` when ``module`` is a LayerNorm."""
    if "forward" in module.__dict__:
        return None  # already bound, by us or by another adapter
    if type(module) is nn.LayerNorm:
        shape = module.normalized_shape
        return ("eps", shape[0]) if len(shape) == 1 else None
    if "LayerNorm" not in type(module).__name__ or not _one_argument_forward(module):
        return None
    if set(module._parameters) - {"weight", "bias"} or module._buffers:
        return None
    width = _width(module)
    if width is None or width < 2:
        return None
    eps_name = next((n for n in _EPS_NAMES if isinstance(getattr(module, n, None), float)), None)
    return agreeing_form(
        module,
        seeded_probe(width) + 1.0,
        [((eps_name, width), _two_pass(eps_name, width))],
        lambda stock, ours: (
            stock.shape == ours.shape and torch.allclose(stock, ours, rtol=1e-4, atol=1e-5)
        ),
    )


class LayerNormTwoPass(TargetedAdapter[tuple[nn.Module, tuple[str | None, int]]]):
    """The ``layernorm-two-pass`` adapter (see the module docstring)."""

    name = "layernorm-two-pass"
    missing = "no LayerNorm found"

    def targets(self, model: nn.Module) -> list[tuple[nn.Module, tuple[str | None, int]]]:
        found: list[tuple[nn.Module, tuple[str | None, int]]] = []
        for module in model.modules():
            form = _form(module)
            if form is not None:
                found.append((module, form))
        return found

    def edit_targets(
        self,
        model: nn.Module,
        edit: ModelEdit,
        targets: list[tuple[nn.Module, tuple[str | None, int]]],
    ) -> None:
        for module, (eps_name, width) in targets:
            edit.bind_forward(module, _two_pass(eps_name, width))


adapter = LayerNormTwoPass()
