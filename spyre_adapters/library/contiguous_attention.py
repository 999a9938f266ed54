"""Attention kernels fed contiguous q/k/v (gap ``sdpa-strided``).

Transformers attention modules build q/k/v as ``proj(x).view(...).transpose(1, 2)``: strided
views. The SDPA math path of the stacks up to 2026.06 miscompiles on such views (wrong numbers,
no error). Matched structurally: every module whose forward (decorators included) looks its
kernel up in the module-level ``ALL_ATTENTION_FUNCTIONS`` registry, which is every attention
module on the Transformers v5 attention interface.

Each gets a per-instance forward whose copy of the modeling module's globals holds a view of
that registry returning the same kernels wrapped to call ``.contiguous()`` on q, k and v first.
The copies hold the same values, so the results are identical; the registry itself and the
class forward are untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import (
    forward_function,
    functions_calling,
    rebind_globals,
)
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["ContiguousAttention", "ContiguousKernels", "adapter"]

_REGISTRY = "ALL_ATTENTION_FUNCTIONS"


def _contiguous(kernel: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(kernel)
    def attention(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return kernel(
            module, query.contiguous(), key.contiguous(), value.contiguous(), *args, **kwargs
        )

    return attention


class ContiguousKernels:
    """A read-only view of an attention registry whose kernels take contiguous q/k/v."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def get_interface(
        self, attn_implementation: str, default: Callable[..., Any]
    ) -> Callable[..., Any]:
        return _contiguous(self.registry.get_interface(attn_implementation, default))

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return _contiguous(self.registry[name])

    def get(
        self, name: str, default: Callable[..., Any] | None = None
    ) -> Callable[..., Any] | None:
        kernel = self.registry.get(name, default)
        return None if kernel is None else _contiguous(kernel)

    def __contains__(self, name: object) -> bool:
        return name in self.registry

    def __getattr__(self, name: str) -> Any:
        return getattr(self.registry, name)


class ContiguousAttention(TargetedAdapter[tuple[str, Any, dict[str, Any]]]):
    """The ``contiguous-attention`` adapter (see the module docstring)."""

    name = "contiguous-attention"
    missing = f"no forward looks its kernel up in {_REGISTRY}"

    def targets(self, model: nn.Module) -> list[tuple[str, Any, dict[str, Any]]]:
        found: list[tuple[str, Any, dict[str, Any]]] = []
        for path, module in model.named_modules():
            fn = forward_function(module)
            if fn is None:
                continue
            callers = functions_calling(fn, _REGISTRY)
            if not callers:
                continue
            owner = callers[0].__globals__
            if isinstance(owner[_REGISTRY], ContiguousKernels):
                continue  # already adapted
            found.append((path, fn, owner))
        return found

    def edit_targets(
        self, model: nn.Module, edit: ModelEdit, targets: list[tuple[str, Any, dict[str, Any]]]
    ) -> None:
        views: dict[int, ContiguousKernels] = {}
        for path, fn, owner in targets:
            view = views.setdefault(id(owner), ContiguousKernels(owner[_REGISTRY]))
            edit.bind_forward(
                model.get_submodule(path), rebind_globals(fn, owner, {_REGISTRY: view})
            )


adapter = ContiguousAttention()
