"""``Tensor.view_as`` and ``Tensor.reshape_as`` computed as the ``view`` and ``reshape`` they
are (a stick-layout chain link, kind ``stick-layout-views-as``).

``x.view_as(other)`` is ``x.view(other.size())``, and ``reshape_as`` likewise, but PyTorch
runs it as a function of its own, which no stick-layout rewrite names: a head split written
with it (Beam's attention gate, ``gate_proj(h).view_as(attn_output)`` with ``attn_output``
``[batch, seq, heads, head_dim]``) reached the device as a view of the stick dim into pieces
narrower than a stick, and stopped at ``sub-stick-head``, where the same split written with
``view`` is computed by ``head-padding``. :class:`ViewsAs` calls ``view`` (``reshape``) with the
other tensor's sizes instead, so the split reaches the rewrites after it in the chain and
``stick-layout``'s as every other view does. Every other call is handed on unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["FUNCTIONS", "KIND", "ViewsAs"]

KIND = "stick-layout-views-as"

#: each ``*_as`` function with the function it is written as
FUNCTIONS: dict[Any, Any] = {
    torch.Tensor.view_as: torch.Tensor.view,
    torch.Tensor.reshape_as: torch.Tensor.reshape,
}


class ViewsAs(TorchFunctionMode):
    """Computes ``view_as`` / ``reshape_as`` as ``view`` / ``reshape`` (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        plain = FUNCTIONS.get(func)
        if plain is not None:
            rest = dict(kwargs)
            x = args[0] if args else rest.pop("self", None)
            other = args[1] if len(args) > 1 else rest.pop("other", None)
            if isinstance(x, torch.Tensor) and isinstance(other, torch.Tensor) and not rest:
                return plain(x, other.shape)
        return func(*args, **kwargs)
