"""``host-mask`` 1.2: 1.1's host-built masks, where a skipped bidirectional mask is one row.

1.1 (:mod:`spyre_adapters.library.host_mask_v1_1`) materialises every mask the stock factory
would skip. For ``create_bidirectional_mask`` a skipped mask means "every query attends to every
key", and 1.1 built it as ``[batch, 1, q, kv]`` with ``q`` the length of the embeddings handed to
the factory. A model may hand that mask to an attention whose queries are another sequence:
BridgeTower builds its image mask from the image tokens (``q = kv = 17``) and passes it as the
``encoder_attention_mask`` of the text tokens' cross-attention (4 queries). The stock model
passes ``None`` there and attends everywhere; 1.1's ``[1, 1, 17, 17]`` mask failed to broadcast
against the ``[1, 4, 4, 17]`` scores (every BridgeTower test stopped).

1.2 returns such a mask with one query row, ``[batch, 1, 1, kv]``: the rows of a bidirectional
mask do not depend on the query, so it is the same mask wherever 1.1's applied, and it
broadcasts against any query length, as ``None`` does. Whether the stock factory would skip is
asked of the stock factory itself, on the host copies of its arguments. Masks the stock factory
materialises, and every other factory, are 1.1's.
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

__all__ = ["HostMaskRow", "adapter"]

#: The factory whose masks hold the same row for every query.
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


def _one_row_when_skipped(
    stock: Callable[..., Any], made: Callable[..., Any]
) -> Callable[..., Any]:
    """``made`` (1.1's host factory of ``stock``), returning one query row of the mask where
    ``stock`` would have skipped it."""

    @functools.wraps(made)
    def factory(*args: Any, **kwargs: Any) -> Any:
        mask = made(*args, **kwargs)
        if not isinstance(mask, torch.Tensor) or mask.dim() != 4 or mask.shape[-2] == 1:
            return mask
        return mask[:, :, :1, :] if _stock_skips(stock, args, kwargs) else mask

    return factory


class HostMaskRow(HostMaskBool):
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
                    if name == BIDIRECTIONAL:
                        made = _one_row_when_skipped(owner[name], made)
                    factories[key] = made
                overrides[name] = factories[key]
            edit.bind_forward(module, rebind_globals(fn, owner, overrides))


adapter = HostMaskRow()
