"""``gather`` run on the host (gap ``indirect-access``).

BERT-style embeddings pick their buffered token-type ids with
``torch.gather(buffered_token_type_ids, dim=1, index=position_ids)`` (BERT, RoBERTa, ELECTRA,
XLM-RoBERTa, CamemBERT and their many copies); the stack has no gather before 2026.06 and keeps
it a host fallback after. Matched structurally: every module whose forward (decorators
included) calls ``gather``.

Each gets a bound forward that runs the stock one inside a ``TorchFunctionMode`` scoped to that
call, which computes ``gather`` on the host and moves the result back to the input's device;
everything else passes through. The indices are small, so the transfer is cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from spyre_adapters.library._mode_scoped_forward import ModeScopedForward

__all__ = ["HostGather", "HostGatherMode", "adapter"]

_NAME = "gather"
_MARK = "_spyre_host_gather"


def _host(value: Any) -> Any:
    return value.cpu() if isinstance(value, torch.Tensor) else value


class HostGatherMode(TorchFunctionMode):
    """Computes ``gather`` on the host while active; everything else passes through."""

    _GATHER = frozenset({torch.gather, torch.Tensor.gather})

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in self._GATHER and args and isinstance(args[0], torch.Tensor):
            device = args[0].device
            result = func(*(_host(a) for a in args), **{k: _host(v) for k, v in kwargs.items()})
            return result.to(device)
        return func(*args, **kwargs)


class HostGather(ModeScopedForward):
    """The ``host-gather`` adapter (see the module docstring)."""

    name = "host-gather"
    missing = "no forward calls gather"
    mode = HostGatherMode
    mark = _MARK
    calls = _NAME


adapter = HostGather()
