"""RMSNorm at the input dtype with ``x * x`` and no upcast (gaps ``dtype-cast``, ``pow``).

Matches by behaviour, not by class name: any module with a one-argument forward, a 1-D
``weight`` (or none) and an epsilon attribute (``variance_epsilon``, ``eps`` or ``epsilon``)
whose output equals ``w * x * rsqrt(mean(x^2) + eps)`` or the unit-offset form
``(1 + w) * x * rsqrt(mean(x^2) + eps)`` (Gemma) on a random probe. That covers the
``*RMSNorm`` classes of Llama, Mistral, Qwen2/3 (including the per-head q/k norms), Gemma 1-3,
OLMo-2, Granite, Phi-3 and T5's ``T5LayerNorm``, and declines LayerNorm and gated variants.

The stock forward casts to fp32, squares with ``pow(2)`` and casts back; the bound forward
computes the same expression at the input dtype with ``x * x``. In fp32 the two are identical
(PyTorch evaluates ``pow(x, 2)`` as ``x * x``); in fp16/bf16 the statistics are rounded at the
input dtype, which is what the stacks before 2026.07 could run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._norm_probe import agreeing_form, seeded_probe
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["RmsNormInputDtype", "adapter", "rms_form"]

_EPS_NAMES = ("variance_epsilon", "eps", "epsilon")
_MARK = "_spyre_rms_norm"


def _eps_name(module: nn.Module) -> str | None:
    for name in _EPS_NAMES:
        if isinstance(getattr(module, name, None), float):
            return name
    return None


def _one_argument_forward(module: nn.Module) -> bool:
    try:
        params = list(inspect.signature(type(module).forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is inspect.Parameter.empty]
    return (
        len(params) == 1
        and len(required) == 1
        and params[0].kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    )


def _rms_forward(eps_name: str, unit_offset: bool) -> Callable[..., torch.Tensor]:
    def forward(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, eps_name)
        variance = (hidden_states * hidden_states).mean(-1, keepdim=True)
        normed = hidden_states * torch.rsqrt(variance + eps)
        weight = self._parameters.get("weight")
        if weight is None:
            return normed
        return normed * (1.0 + weight) if unit_offset else weight * normed

    setattr(forward, _MARK, True)
    return forward


def rms_form(module: nn.Module) -> tuple[str, bool] | None:
    """``(eps attribute, unit offset?)`` when ``module`` is an RMSNorm, else None."""
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm)) or not _one_argument_forward(module):
        return None
    bound = module.__dict__.get("forward")
    if bound is not None:
        return None  # someone (maybe us) already bound a forward: leave it alone
    eps_name = _eps_name(module)
    weight = module._parameters.get("weight")
    if eps_name is None or weight is None or weight.dim() != 1 or weight.numel() < 2:
        return None
    if any(name != "weight" for name in module._parameters) or module._buffers:
        return None
    return agreeing_form(
        module,
        seeded_probe(weight.numel()),
        (
            ((eps_name, unit_offset), _rms_forward(eps_name, unit_offset))
            for unit_offset in (False, True)
        ),
        lambda stock, ours: (
            ours.shape == stock.shape and torch.allclose(ours, stock, rtol=1e-5, atol=1e-6)
        ),
    )


class RmsNormInputDtype(TargetedAdapter[tuple[nn.Module, tuple[str, bool]]]):
    """The ``rms-norm`` adapter (see the module docstring)."""

    name = "rms-norm"
    missing = "no RMSNorm found"

    def targets(self, model: nn.Module) -> list[tuple[nn.Module, tuple[str, bool]]]:
        forms: list[tuple[nn.Module, tuple[str, bool]]] = []
        for module in model.modules():
            form = rms_form(module)
            if form is not None:
                forms.append((module, form))
        return forms

    def edit_targets(
        self, model: nn.Module, edit: ModelEdit, targets: list[tuple[nn.Module, tuple[str, bool]]]
    ) -> None:
        forwards: dict[tuple[str, bool], Callable[..., Any]] = {}
        for module, form in targets:
            forward = forwards.setdefault(form, _rms_forward(*form))
            edit.bind_forward(module, forward)


adapter = RmsNormInputDtype()
