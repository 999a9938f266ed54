"""Matching normalisation modules by behaviour on a random probe.

The norm adapters accept a module when its own forward and one of their replacement forwards
give the same output on a random input. :func:`agreeing_form` runs that comparison on an fp32
host copy of the module, so the model's own dtype and device cannot blur it, with gradients
off; a module whose forward cannot run the probe agrees with nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TypeVar

import torch
from torch import nn

__all__ = ["agreeing_form", "seeded_probe"]

F = TypeVar("F")

Forward = Callable[[nn.Module, torch.Tensor], torch.Tensor]
Agree = Callable[[torch.Tensor, torch.Tensor], bool]


def seeded_probe(width: int) -> torch.Tensor:
    """A reproducible ``(2, 3, width)`` normal probe scaled by 3."""
    return torch.randn(2, 3, width, generator=torch.Generator().manual_seed(0)) * 3.0


def agreeing_form(
    module: nn.Module,
    probe: torch.Tensor,
    candidates: Iterable[tuple[F, Forward]],
    agree: Agree,
) -> F | None:
    """The form of the first candidate forward for which ``agree(stock, ours)`` holds on
    ``probe``, ``stock`` being the output of an fp32 host copy of ``module`` and ``ours`` that
    of the candidate applied to the same copy; None when none agrees or the copy cannot run."""
    reference = copy.deepcopy(module).to(device="cpu", dtype=torch.float32)
    with torch.no_grad():
        try:
            stock = reference(probe)
        except Exception:  # a module that cannot run the probe is none of the forms
            return None
        for form, forward in candidates:
            if agree(stock, forward(reference, probe)):
                return form
    return None
