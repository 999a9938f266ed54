"""Splits of an integer tensor's stick dim, computed on the host.

``sub-stick-head`` refuses a view that splits the last (stick) dim into pieces shorter than a
stick whatever the dtype (32 elements of int32). Floating tensors are split by a placement
matmul (:mod:`spyre_adapters.library._stick_layout`); integer and bool tensors cannot be: a
matmul in the device's 16-bit float holds integers exactly only up to 2**11. Such tensors in a
forward are masks, ids and block indices, one value per token: LongT5 cuts its attention mask
into blocks (``[b, s] -> [b, s / k, k]``). This mode (kind ``stick-layout-int``) computes those
views on the host (``x.cpu().reshape(sizes)``, moved back to ``x``'s device): the same values,
in a tensor of the stock shape. Which views it takes is asked of the release's own rule
(:func:`spyre_sim.layout.active_rules` of ``aten.view``), so a view the release lowers stays a
view, and none is taken with layout checks off.

Like the floating rewrite, the result is a new tensor where the stock one is a view: a write
into it does not reach ``x``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

import spyre_sim
from spyre_adapters.library._scoped_modes import register_kind
from spyre_adapters.library._stick_layout import _last_dim, _target

__all__ = ["KIND", "IntHeadSplit", "refused"]

KIND = "stick-layout-int"
_GAP = "sub-stick-head"
_VIEWS = frozenset({torch.Tensor.view, torch.Tensor.reshape, torch.reshape})
_UNFLATTENS = frozenset({torch.Tensor.unflatten, torch.unflatten})


def refused(x: torch.Tensor, sizes: Sequence[int]) -> bool:
    """Whether the active release refuses ``x.view(sizes)`` as a ``sub-stick-head`` split."""
    release = spyre_sim.current_stack()
    checks = spyre_sim.settings.layout_checks
    for rule in spyre_sim.layout.active_rules(release, "aten.view", checks):
        if rule.gap == _GAP and rule.check("aten.view", (x, list(sizes)), {}) is not None:
            return True
    return False


def _sizes(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[int] | None:
    """The target shape of a view/reshape, or of an unflatten of the last dim."""
    x = args[0]
    if func in _VIEWS:
        return _target(tuple(args), kwargs, 1)
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    pieces = args[2] if len(args) > 2 else kwargs.get("sizes")
    if not isinstance(dim, int) or not _last_dim(x, dim) or not isinstance(pieces, (list, tuple)):
        return None
    if not all(isinstance(p, int) for p in pieces):
        return None
    return [*x.shape[:-1], *pieces]


class IntHeadSplit(TorchFunctionMode):
    """Takes refused splits of integer and bool tensors to the host (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if (func in _VIEWS or func in _UNFLATTENS) and args:
            x = args[0]
            if (
                isinstance(x, torch.Tensor)
                and x.dim() > 0
                and not x.is_floating_point()
                and not x.is_complex()
            ):
                sizes = _sizes(func, args, kwargs)
                if sizes is not None and refused(x, sizes):
                    return x.cpu().reshape(sizes).to(x.device)
        return func(*args, **kwargs)


def _factory(settings: frozenset[Any]) -> IntHeadSplit:
    return IntHeadSplit()


register_kind(KIND, _factory)
