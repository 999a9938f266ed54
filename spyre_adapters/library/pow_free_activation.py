"""GELU approximations and squared ReLU without ``pow`` (gap ``pow``).

Matches the Transformers activation modules that call ``torch.pow`` (directly or through
``torch.square``): ``NewGELUActivation`` (``gelu_new``: GPT-2, GPT-J, GPT-Neo, CodeGen, Phi),
``AccurateGELUActivation`` (``gelu_accurate``), ``GELUTanh`` in its Python mode
(``gelu_python_tanh``) and ``ReLUSquaredActivation`` (``relu2``: Persimmon, Nemotron). Each gets a
bound forward with the same expression written with ``x * x * x`` / ``r * r``. PyTorch evaluates
``pow(x, 3)`` and ``pow(x, 2)`` by repeated multiplication, so the results are identical.
``gelu_pytorch_tanh`` in its default mode calls the fused ``gelu`` kernel (no ``pow``) and is
left alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit

__all__ = ["PowFreeActivation", "adapter"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_new(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
    return (
        0.5
        * input
        * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (input + 0.044715 * (input * input * input))))
    )


def _gelu_tanh_python(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
    return (
        input
        * 0.5
        * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (input + 0.044715 * (input * input * input))))
    )


def _gelu_accurate(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
    constant = float(getattr(self, "precomputed_constant", _SQRT_2_OVER_PI))
    return 0.5 * input * (1 + torch.tanh(constant * (input + 0.044715 * (input * input * input))))


def _relu_squared(self: nn.Module, input: torch.Tensor) -> torch.Tensor:
    relu_applied = nn.functional.relu(input)
    return relu_applied * relu_applied


def _replacement(module: nn.Module) -> Callable[..., torch.Tensor] | None:
    if "forward" in module.__dict__:
        return None  # already bound (by us or by another adapter)
    from transformers import activations

    if type(module) is activations.NewGELUActivation:
        return _gelu_new
    if type(module) is activations.AccurateGELUActivation:
        return _gelu_accurate
    if type(module) is activations.ReLUSquaredActivation:
        return _relu_squared
    if type(module) is activations.GELUTanh and not isinstance(
        getattr(module, "act", None), functools.partial
    ):
        return _gelu_tanh_python
    return None


class PowFreeActivation:
    """The ``pow-free-activation`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return any(_replacement(module) is not None for module in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = [(m, f) for m in model.modules() if (f := _replacement(m)) is not None]
        if not targets:
            raise ValueError(
                f"pow-free-activation does not apply to {type(model).__name__}: "
                "no pow-based activation module found"
            )
        for module, forward in targets:
            edit.bind_forward(module, forward)


adapter = PowFreeActivation()
