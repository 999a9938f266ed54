"""``host-mask`` 1.2: 1.1's host-built masks, where a skipped bidirectional mask stays skipped
under eager attention.

1.1 (:mod:`spyre_adapters.library.host_mask_v1_1`) materialises every mask the stock factory
would skip, because under SDPA a skipped mask can become SDPA's implicit causal path, which
builds a causal mask on the device. For ``create_bidirectional_mask`` under ``eager``
attention a skip can only mean what the stock model computes, "every query attends to every
key", and no mask at all is what the device should get: 1.1's materialised ``[batch, 1, q,
kv]`` mask is then a tensor the stock model never had, and a model may use it where the stock
``None`` went unchecked. BridgeTower (Transformers 5.15) builds its image mask from the image
tokens (``q = kv = 17``) and hands it to the text tokens' cross-attention (4 queries): 1.1's
``[1, 1, 17, 17]`` failed to broadcast against the ``[1, 4, 4, 17]`` scores. (Returning one
query row instead, broadcastable to any query length, fails the other way: Autoformer and a
dozen more families check that a mask they are given is ``[batch, 1, q, kv]``.)

1.2 asks the stock factory itself, on host copies of its arguments, whether it skips, and
returns ``None`` where it does for a bidirectional mask of an ``eager`` model. Masks the stock
factory materialises, every mask under ``sdpa``, and every other factory are 1.1's.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import rebind_globals
from spyre_adapters.library.host_mask import (
    _SUPPORTED_ATTENTION,
    _attention_implementation,
    _host_factory,
    _skip_is_full,
    _targets,
)
from spyre_adapters.library.host_mask_v1_1 import HostMaskBool, _bool_kept, reads_mask_as_bool

__all__ = ["HostMaskEagerSkip", "adapter"]

#: The factory whose skipped mask means "attend to every key" whatever the attention module.
BIDIRECTIONAL = "create_bidirectional_mask"


def _stock_skips(stock: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``stock`` skips the mask for these arguments, asked on host copies of them (the
    embeddings as a zero-stride stand-in: the factory reads only their shape and dtype)."""
    bound = inspect.signature(stock).bind(*args, **kwargs)
    embeds = bound.arguments.get("inputs_embeds", bound.arguments.get("input_embeds"))
    for name, value in list(bound.arguments.items()):
        if isinstance(value, torch.Tensor):
            host: torch.Tensor = value
            if host is embeds:
                host = torch.zeros((), dtype=host.dtype).expand(host.shape)
            bound.arguments[name] = host.cpu()
    return stock(*bound.args, **bound.kwargs) is None


def _none_when_skipped(stock: Callable[..., Any], made: Callable[..., Any]) -> Callable[..., Any]:
    """``made`` (1.1's host factory of ``stock``), returning ``None`` where ``stock`` skips."""

    @functools.wraps(made)
    def factory(*args: Any, **kwargs: Any) -> Any:
        return None if _stock_skips(stock, args, kwargs) else made(*args, **kwargs)

    return factory


class HostMaskEagerSkip(HostMaskBool):
    """``host-mask`` 1.2 (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        implementation = _attention_implementation(model)
        targets = _targets(model)
        if implementation not in _SUPPORTED_ATTENTION or not targets:
            super().apply(model, edit)  # raises 1.0's error
            return
        factories: dict[tuple[int, str, bool, bool], Callable[..., Any]] = {}
        for path, fn, owner, names in targets:
            module = model.get_submodule(path)
            full, keep = _skip_is_full(module), reads_mask_as_bool(module)
            make = _bool_kept if keep else _host_factory
            overrides: dict[str, Callable[..., Any]] = {}
            for name in names:
                key = (id(owner), name, full, keep)
                if key not in factories:
                    made = make(owner[name], full)
                    if name == BIDIRECTIONAL and implementation == "eager":
                        made = _none_when_skipped(owner[name], made)
                    factories[key] = made
                overrides[name] = factories[key]
            edit.bind_forward(module, rebind_globals(fn, owner, overrides))


adapter = HostMaskEagerSkip()
