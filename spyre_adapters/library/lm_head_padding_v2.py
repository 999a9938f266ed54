"""``lm-head-padding`` 2.x: an LM head the device refuses, padded inside its forward (gap
``core-span``).

1.x (:mod:`spyre_adapters.library.lm_head_padding`) replaces the head with a module over a
padded vocab whenever the vocab is not a smooth stick count, which shows in the state dict
(``save_pretrained`` writes the padded weight; ``from_pretrained`` of the stock class then
refuses it). 2.x matches only a head whose per-core span really overflows (the device's
``core-span`` rule), and pads it for each matmul inside the head's own forward: the head's
parameters, the state dict and the logits keep their stock shapes. The padded copy of the
weight is kept per weight version on the module's device, so an unchanged head is padded once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.lm_head_padding import (
    _CORE_SPAN_BYTES,
    _STICK_ELEMENTS,
    _head,
    padded_vocab,
    per_core_span,
)

__all__ = ["InvisibleLmHeadPadding", "adapter"]


def _overflows(vocab: int, hidden: int) -> bool:
    """Whether the device refuses an LM head of this shape (the ``core-span`` rule)."""
    return per_core_span(-(-vocab // _STICK_ELEMENTS), hidden) > _CORE_SPAN_BYTES


def _padded_forward(vocab: int, padded: int) -> Callable[..., torch.Tensor]:
    """The forward of a head whose weight and bias are padded to ``padded`` rows for each
    matmul (a copy per weight version, kept on the module's device) and whose logits are cut
    back to ``vocab`` at offset 0."""
    cache: dict[str, Any] = {}

    def forward(self: nn.Linear, hidden_states: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight, self.bias
        key = (id(weight), weight._version, weight.device, None if bias is None else bias._version)
        if cache.get("key") != key:
            extra = padded - vocab
            cache["weight"] = torch.cat([weight, weight.new_zeros(extra, weight.shape[1])])
            cache["bias"] = None if bias is None else torch.cat([bias, bias.new_zeros(extra)])
            cache["key"] = key
        logits = nn.functional.linear(hidden_states, cache["weight"], cache["bias"])
        return logits[..., :vocab]

    return forward


class InvisibleLmHeadPadding:
    """``lm-head-padding`` 2.x: matches only a head the device refuses (its per-core span
    overflows), and pads it inside the forward: the head's parameters, the state dict and the
    logits keep their stock shapes (1.x replaced the head with a padded module, which showed
    in the state dict)."""

    def matches(self, model: nn.Module) -> bool:
        head = _head(model)
        return head is not None and _overflows(*head.weight.shape)

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        head = _head(model)
        if head is None or not _overflows(*head.weight.shape):
            raise ValueError(
                f"lm-head-padding does not apply to {type(model).__name__}: no LM head whose "
                "per-core span overflows"
            )
        vocab, hidden = head.weight.shape
        edit.bind_forward(head, _padded_forward(vocab, padded_vocab(vocab, hidden)))


adapter = InvisibleLmHeadPadding()
