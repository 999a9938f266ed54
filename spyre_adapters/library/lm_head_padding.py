"""LM head padded to a smooth stick count that fits the per-core span; logits cropped back
(gap ``core-span``).

A matmul weight is divided over the 32 cores by whole sticks (64 fp16 elements of the output
dim), and only into a number of parts that divides its stick count. A vocab whose stick count
has a large prime factor (151936 = 2374 sticks = 2 x 1187) splits over 2 cores at most, and a
half of a large LM head overflows the 256 MB a core can span. Padding the vocab with zero rows
to a 7-smooth stick count (2374 -> 2400 = 2^5 3 5^2) lets it spread over all 32 cores.

Matches a model whose output embedding (``get_output_embeddings()``) is an ``nn.Linear`` with a
vocab that is not a whole number of sticks, or whose stick count is not 7-smooth, or whose
per-core span is too large; that is every causal LM family with such a vocab. The head becomes
:class:`PaddedLMHead`: the padded weight is built on the host at prepare time (a copy, so a tied
input embedding is left untouched), and the logits are cut back to the true vocab at offset 0
(inside the stick rules) so no zero-row logit can win an argmax. Lasting: permanent.
"""

from __future__ import annotations

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit

__all__ = ["LmHeadPadding", "PaddedLMHead", "adapter", "padded_vocab", "per_core_span"]

# docs/STACK.md §3: a stick is 128 bytes (64 fp16/bf16 elements); 32 cores; 256 MB per core.
_STICK_ELEMENTS = 64
_STICK_BYTES = 128
_CORES = 32
_CORE_SPAN_BYTES = 256 * 1024 * 1024
_SMOOTH_PRIMES = (2, 3, 5, 7)


def per_core_span(sticks: int, k: int) -> int:
    """Bytes one core spans for a weight of ``sticks`` output sticks and reduction dim ``k``."""
    cores = max(d for d in range(1, _CORES + 1) if sticks % d == 0)
    return (sticks // cores) * _STICK_BYTES * k


def _smooth(n: int) -> bool:
    for prime in _SMOOTH_PRIMES:
        while n % prime == 0:
            n //= prime
    return n == 1


def _fits(sticks: int, k: int) -> bool:
    return _smooth(sticks) and per_core_span(sticks, k) <= _CORE_SPAN_BYTES


def padded_vocab(vocab: int, hidden: int) -> int:
    """The smallest vocab >= ``vocab`` made of whole sticks whose count is 7-smooth and whose
    per-core span with reduction dim ``hidden`` fits the 256 MB limit."""
    sticks = -(-vocab // _STICK_ELEMENTS)
    while not _fits(sticks, hidden):
        sticks += 1
    return sticks * _STICK_ELEMENTS


class PaddedLMHead(nn.Module):
    """``Linear`` over a zero-padded vocab whose output is cut back to ``vocab_size``."""

    def __init__(self, stock: nn.Linear, padded: int) -> None:
        super().__init__()
        vocab, hidden = stock.weight.shape
        self.vocab_size = vocab
        extra = padded - vocab
        with torch.no_grad():
            weight = stock.weight.detach()
            self.weight = nn.Parameter(torch.cat([weight, weight.new_zeros(extra, hidden)]))
            if stock.bias is not None:
                bias = stock.bias.detach()
                self.bias: nn.Parameter | None = nn.Parameter(
                    torch.cat([bias, bias.new_zeros(extra)])
                )
            else:
                self.bias = None

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return self.vocab_size

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        logits = nn.functional.linear(hidden_states, self.weight, self.bias)
        return logits[..., : self.vocab_size]  # offset-0 cut: the padding rows never surface

    def extra_repr(self) -> str:
        return f"vocab={self.vocab_size}, padded to {self.weight.shape[0]}"


def _head(model: nn.Module) -> nn.Linear | None:
    getter = getattr(model, "get_output_embeddings", None)
    if getter is None:
        return None
    try:
        head = getter()
    except (AttributeError, NotImplementedError):
        return None
    return head if type(head) is nn.Linear else None


class LmHeadPadding:
    """The ``lm-head-padding`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        head = _head(model)
        if head is None:
            return False
        vocab, hidden = head.weight.shape
        return padded_vocab(vocab, hidden) != vocab

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        head = _head(model)
        if head is None:
            raise ValueError(
                f"lm-head-padding does not apply to {type(model).__name__}: "
                "get_output_embeddings() is not an nn.Linear"
            )
        vocab, hidden = head.weight.shape
        padded = padded_vocab(vocab, hidden)
        if padded == vocab:
            raise ValueError(
                f"lm-head-padding: the vocab {vocab} already is a smooth stick count that fits "
                "the per-core span; nothing to pad"
            )
        edit.replace_module(edit.path_of(head), PaddedLMHead(head, padded))


adapter = LmHeadPadding()
