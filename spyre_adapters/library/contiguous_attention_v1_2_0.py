"""SDPA called with q/k/v in fresh row-major storage (gaps ``sdpa-strided`` and
``decode-query-layout``): the ``contiguous-attention`` adapter, 1.2.

1.1 (:mod:`spyre_adapters.library.contiguous_attention_v1_1_0`) hands SDPA ``q.contiguous()``.
PyTorch calls a tensor contiguous without looking at the strides of its size-1 dims, so a
decode query, the ``[B, H, 1, D]`` view of a ``[B, 1, H, D]`` projection (strides ``(H*D, D,
H*D, 1)``), is already "contiguous" and ``.contiguous()`` returns it as it is. The stack reads
the order of the dims from the strides: with the flash-attention kernel of 2026.07 the score
matmul took that query as heads-outer and mixed its heads (gap ``decode-query-layout``,
torch-spyre #3881, fixed by #3926, which copies the query into fresh contiguous storage before
the score matmul).

1.2 does that at the call: a q, k or v whose strides are not the row-major strides of its
shape (size-1 dims included) is cloned with ``memory_format=torch.contiguous_format``, which
gives it exactly those strides; one that has them is passed as it is. A copy holds the same
values, so the results are the stock model's. Everything else (the scope, the structural match,
being the outermost mode but for 1.1's kind) is 1.1's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function
from spyre_adapters.library._scoped_modes import enable, enabled, register_kind
from spyre_adapters.library.contiguous_attention_v1_1_0 import (
    KIND as KIND_1_1,
)
from spyre_adapters.library.contiguous_attention_v1_1_0 import (
    ContiguousSdpaMode,
    reaches_sdpa,
)

__all__ = ["KIND", "FreshSdpa", "FreshSdpaMode", "adapter", "row_major", "row_major_strides"]

KIND = "contiguous-sdpa-2"
"""The scoped-mode kind (sorted right after 1.1's: outside every other adapter's mode)."""
_OPERANDS = ("query", "key", "value")


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a freshly allocated row-major tensor of ``shape`` (size-1 dims too)."""
    strides: list[int] = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def row_major(value: Any) -> Any:
    """``value`` in fresh row-major storage when its strides differ from that layout's."""
    if not isinstance(value, torch.Tensor) or value.stride() == row_major_strides(value.shape):
        return value
    return value.clone(memory_format=torch.contiguous_format)


class FreshSdpaMode(TorchFunctionMode):
    """While active, SDPA receives q, k and v with row-major strides; everything else passes
    through."""

    _SDPA = ContiguousSdpaMode._SDPA

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in self._SDPA:
            args = tuple(row_major(a) if i < 3 else a for i, a in enumerate(args))
            for name in _OPERANDS:
                if name in kwargs:
                    kwargs[name] = row_major(kwargs[name])
        return func(*args, **kwargs)


def _factory(settings: frozenset[object]) -> FreshSdpaMode:
    return FreshSdpaMode()


register_kind(KIND, _factory)


class FreshSdpa:
    """The ``contiguous-attention`` adapter, version 1.2 (see the module docstring)."""

    name = "contiguous-attention"

    def matches(self, model: nn.Module) -> bool:
        kinds = enabled(model)
        if KIND in kinds or KIND_1_1 in kinds:
            return False  # already adapted (by this version or by 1.1)
        for module in model.modules():
            fn = forward_function(module)
            if fn is not None and reaches_sdpa(module, fn):
                return True
        return False

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        if not self.matches(model):
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: no forward reaches "
                "scaled_dot_product_attention or ALL_ATTENTION_FUNCTIONS, or the model is "
                "already adapted"
            )
        enable(model, edit, KIND, frozenset())


adapter = FreshSdpa()
