"""``layernorm-two-pass`` 1.1.0 and 2.1.0: 1.0.2's and 2.0.1's two-pass LayerNorm, also for
``nn.LayerNorm`` subclasses whose own forward rearranges the input around the stock one.

1.0.2 and 2.0.1 (:mod:`spyre_adapters.library.layer_norm_stats_uncopied`) replace the forward
of ``nn.LayerNorm`` and of modules whose forward computes a LayerNorm of the last dim (checked
on a probe). A subclass such as ConvNeXt's ``ConvNextLayerNorm`` with
``data_format="channels_first"`` permutes its input to channels-last, calls
``super().forward`` and permutes back: the probe rightly refuses it (it normalises another
dim), and ``super().forward`` is looked up on the class, so no forward bound on the instance
is ever called. The fused kernel ran unchanged and returned NaN on the near-constant rows of
ConvNeXt's deeper feature maps (a backbone's ``hidden_states_norms`` at 2026.09).

These versions bind, on such a subclass instance, a forward that runs the stock one with
:class:`TwoPassLayerNormMode` entered: inside that forward, and only there, every
``F.layer_norm`` call is computed in the two-pass form of the version each follows, over all
the normalised dims, with the call's own weight, bias and epsilon. Everything else of the stock
forward (permutes, reshapes, other ops) runs as written. Modules the earlier versions match are
edited exactly as they edit them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._targeted_adapter import TargetedAdapter
from spyre_adapters.library.layer_norm_stats import _form
from spyre_adapters.library.layer_norm_stats_uncopied import _two_pass

__all__ = ["LayerNormTwoPassSubclassed", "TwoPassLayerNormMode", "fp32_statistics", "input_dtype"]

#: A target: the module, and ``(eps attribute, width)`` when the earlier versions' bound forward
#: replaces it, or ``None`` when its stock forward runs under :class:`TwoPassLayerNormMode`.
Target = tuple[nn.Module, tuple[str | None, int] | None]


def two_pass_layer_norm(
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    fp32: bool,
) -> torch.Tensor:
    """``F.layer_norm`` with explicit two-pass statistics over the last
    ``len(normalized_shape)`` dims (in fp32 when ``fp32``, cast back), a contiguous result."""
    dims = tuple(range(-len(normalized_shape), 0))
    x = input.to(torch.float32) if fp32 else input
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    variance = (centred * centred).mean(dim=dims, keepdim=True)
    normed = centred * torch.rsqrt(variance + eps)
    if weight is not None:
        normed = normed * (weight.to(torch.float32) if fp32 else weight)
    if bias is not None:
        normed = normed + (bias.to(torch.float32) if fp32 else bias)
    if fp32:
        normed = normed.to(input.dtype)
    return normed.contiguous()


class TwoPassLayerNormMode(TorchFunctionMode):
    """While entered, ``F.layer_norm`` (and ``torch.layer_norm``) calls are computed by
    :func:`two_pass_layer_norm`; every other call runs as it is."""

    def __init__(self, *, fp32: bool) -> None:
        super().__init__()
        self.fp32 = fp32

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.layer_norm or func is torch.layer_norm:
            names = ("input", "normalized_shape", "weight", "bias", "eps")
            bound = dict(zip(names, args, strict=False))
            bound.update({k: v for k, v in kwargs.items() if k in names})
            if isinstance(bound.get("input"), torch.Tensor) and "normalized_shape" in bound:
                return two_pass_layer_norm(
                    bound["input"],
                    tuple(bound["normalized_shape"]),
                    bound.get("weight"),
                    bound.get("bias"),
                    float(bound.get("eps", 1e-5)),
                    fp32=self.fp32,
                )
        return func(*args, **kwargs)


def _under_mode(fp32: bool) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with TwoPassLayerNormMode(fp32=fp32):
            return type(self).forward(self, *args, **kwargs)

    return forward


def _rearranging_subclass(module: nn.Module) -> bool:
    """An ``nn.LayerNorm`` subclass with a forward of its own, not yet bound by anyone."""
    return (
        isinstance(module, nn.LayerNorm)
        and type(module).forward is not nn.LayerNorm.forward
        and "forward" not in module.__dict__
    )


class LayerNormTwoPassSubclassed(TargetedAdapter[Target]):
    """``layernorm-two-pass`` 1.1.0 (``fp32=False``) or 2.1.0 (see the module docstring)."""

    name = "layernorm-two-pass"
    missing = "no LayerNorm found"

    def __init__(self, *, fp32: bool) -> None:
        self.fp32 = fp32

    def targets(self, model: nn.Module) -> list[Target]:
        found: list[Target] = []
        for module in model.modules():
            form = _form(module)
            if form is not None:
                found.append((module, form))
            elif _rearranging_subclass(module):
                found.append((module, None))
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[Target]) -> None:
        for module, form in targets:
            if form is None:
                edit.bind_forward(module, _under_mode(self.fp32))
            else:
                edit.bind_forward(module, _two_pass(form[0], self.fp32))


input_dtype = LayerNormTwoPassSubclassed(fp32=False)
"""1.1.0: statistics at the input dtype, as 1.0.2."""
fp32_statistics = LayerNormTwoPassSubclassed(fp32=True)
"""2.1.0: statistics in fp32, as 2.0.1."""
