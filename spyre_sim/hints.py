"""Remedies that layers above add to the device's lowering errors, at the moment they are raised.

The device knows gaps, not adapters (it runs without any adapter installed). A layer that does
know them (``pytest --spyre``, triage) registers a provider; every :class:`SpyreLoweringError`
the device raises is handed to each provider together with the model whose forward was running
(``None`` outside any forward), and the provider may ``error.add_hint(...)``::

    def provider(error, model):
        if error.gap == "sin-cos" and model is not None:
            error.add_hint("adapter `rope-rotation` bridges it for this model")

    remove = spyre_sim.hints.add_provider(provider)
    ...
    remove()

A provider that raises is a bug of that provider: its exception propagates.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from spyre_sim.errors import SpyreLoweringError

__all__ = ["Provider", "add_provider", "provide"]

Provider = Callable[[SpyreLoweringError, "torch.nn.Module | None"], None]

_providers: list[Provider] = []


def add_provider(provider: Provider) -> Callable[[], None]:
    """Register ``provider``; returns a function that unregisters it."""
    _providers.append(provider)

    def remove() -> None:
        if provider in _providers:
            _providers.remove(provider)

    return remove


def provide(error: SpyreLoweringError, model: torch.nn.Module | None) -> None:
    """Let every registered provider add hints to ``error`` (called by the device)."""
    for provider in list(_providers):
        provider(error, model)
