"""SDPA with its keys padded to whole sticks (gap ``sdpa-seq-align``): the
``sdpa-key-padding`` adapter.

The stack's SDPA mis-lowers the score matmul when the key length spans more than one
64-element stick and its last stick is partial (torch-spyre #3113, open at the end of the
evidence: ``[1, 16, 3500, 64]`` is off by 0.35 while the same attention padded to 3520 keys
matches). No error is raised: the numbers are wrong. The padded form is what real teams run,
and it is exact: the extra keys are zeros that the attention mask hides, so each query's softmax
gives them weight zero and the output is the stock one.

The model's forwards run under a ``TorchFunctionMode`` of the scoped-mode kind
``sdpa-key-padding`` (:mod:`spyre_adapters.library._scoped_modes`), which intercepts
``scaled_dot_product_attention`` (the functional and the ATen op). A call whose key length ``S``
is above one stick and not a multiple of :data:`STICK` gets ``key`` and ``value`` zero-padded
along the sequence dim to the next multiple, and a mask that hides the padding:

- no mask: a boolean mask over the keys (``True`` for the real ones);
- a boolean mask: extended with ``False`` columns; a float mask: with the dtype's lowest finite
  value (the device's 16-bit float has no infinity), which is what the stock masks use;
- ``is_causal`` with no more queries than keys: nothing to add, the causal mask of PyTorch
  (top-left aligned) already hides every key after the last query; with more queries than keys
  the call is left as it is (no such call in Transformers' kernels).

The query length, the output shape and every other call are unchanged, so nothing the model
returns differs in shape. Matched structurally like ``contiguous-attention``: a model with a
module whose forward reaches SDPA or the attention registry
(:func:`spyre_adapters.library.contiguous_attention_v1_1_0.reaches_sdpa`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function
from spyre_adapters.library._scoped_modes import enable, enabled, register_kind
from spyre_adapters.library.contiguous_attention_v1_1_0 import reaches_sdpa

__all__ = ["KIND", "STICK", "SdpaKeyPadding", "SdpaKeyPaddingMode", "adapter", "pad_keys"]

KIND = "sdpa-key-padding"
STICK = 64
"""Elements per stick of a 16-bit float: the key-length granule of the score matmul."""

_SDPA = frozenset(
    {
        nn.functional.scaled_dot_product_attention,
        torch.ops.aten.scaled_dot_product_attention,
        torch.ops.aten.scaled_dot_product_attention.default,
    }
)
_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")


def _padded_length(length: int) -> int:
    if length <= STICK or length % STICK == 0:
        return length
    return (length // STICK + 1) * STICK


def _pad_sequence(x: torch.Tensor, extra: int) -> torch.Tensor:
    """``x`` [..., S, D] with ``extra`` zero rows after its last position."""
    return torch.cat([x, x.new_zeros((*x.shape[:-2], extra, x.shape[-1]))], dim=-2)


def _pad_mask(mask: torch.Tensor | None, key: torch.Tensor, extra: int) -> torch.Tensor:
    """The mask extended over ``extra`` padded keys, hiding them."""
    length = key.shape[-2]
    if mask is None:
        real = key.new_ones((1, length), dtype=torch.bool)
        return torch.cat([real, key.new_zeros((1, extra), dtype=torch.bool)], dim=-1)
    if mask.shape[-1] != length:  # broadcast over the keys: make the key dim explicit
        mask = mask.expand(*mask.shape[:-1], length)
    shape = (*mask.shape[:-1], extra)
    if mask.dtype == torch.bool:
        hidden = mask.new_zeros(shape)
    else:
        hidden = mask.new_full(shape, torch.finfo(mask.dtype).min)
    return torch.cat([mask, hidden], dim=-1)


def pad_keys(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of one SDPA call with keys and values padded to whole sticks and the
    padding masked; the same arguments where nothing needs padding."""
    bound = dict(zip(_NAMES, args, strict=False))
    for name, value in kwargs.items():
        bound[name] = value
    query, key, value = bound.get("query"), bound.get("key"), bound.get("value")
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
        return args, kwargs
    assert isinstance(query, torch.Tensor)
    assert isinstance(key, torch.Tensor)
    assert isinstance(value, torch.Tensor)
    if key.dim() < 2 or value.shape[-2] != key.shape[-2]:
        return args, kwargs
    length = key.shape[-2]
    extra = _padded_length(length) - length
    if extra == 0:
        return args, kwargs
    causal = bool(bound.get("is_causal", False))
    mask = bound.get("attn_mask")
    if causal and (mask is not None or query.shape[-2] > length):
        return args, kwargs  # PyTorch refuses a mask with is_causal; no padding hides here
    if mask is not None and not isinstance(mask, torch.Tensor):
        return args, kwargs
    bound["key"] = _pad_sequence(key, extra)
    bound["value"] = _pad_sequence(value, extra)
    if not causal:
        bound["attn_mask"] = _pad_mask(mask, key, extra)
    positional = tuple(bound.pop(name) for name in _NAMES[:3])
    return positional, bound


class SdpaKeyPaddingMode(TorchFunctionMode):
    """While active, SDPA calls get keys padded to whole sticks (see the module docstring)."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in _SDPA:
            args, kwargs = pad_keys(args, kwargs)
        return func(*args, **kwargs)


def _factory(settings: frozenset[object]) -> SdpaKeyPaddingMode:
    return SdpaKeyPaddingMode()


register_kind(KIND, _factory)


class SdpaKeyPadding:
    """The ``sdpa-key-padding`` adapter, version 1.0 (see the module docstring)."""

    name = "sdpa-key-padding"

    def matches(self, model: nn.Module) -> bool:
        if KIND in enabled(model):
            return False  # already adapted
        for module in model.modules():
            fn = forward_function(module)
            if fn is not None and reaches_sdpa(module, fn):
                return True
        return False

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        if not self.matches(model):
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: no forward reaches "
                "scaled_dot_product_attention or ALL_ATTENTION_FUNCTIONS"
            )
        enable(model, edit, KIND, frozenset())


adapter = SdpaKeyPadding()
