"""``host-mask`` 1.1: 1.0's host-built masks, kept boolean for models that read them as such.

1.0 (:mod:`spyre_adapters.library.host_mask`) turns the boolean masks of the ``sdpa``
implementation into additive ones (``0`` / ``finfo.min / 2``). Attention that receives the
mask as such is unchanged by that, but a model that reads it as a boolean inverts it:
NVIDIA's streaming ASR encoders (Nemotron ASR streaming, Nemotron 3.5 ASR) mask their
relative-position scores with ``matrix_bd.masked_fill_(attention_mask.logical_not(), -inf)``,
and ``logical_not`` of an additive mask is true exactly where attention is allowed: a silent
wrong answer (cosine 0.77 against the stock model on the CPU).

1.1 reads the forwards of the modules below each adapted one. Where one of them takes
``logical_not`` of, negates (``~``) or ``masked_fill``\\s with its ``attention_mask``, a mask the
stock factory returns as a boolean stays one: built on the host as in 1.0 and moved to the
device in the stock form (a boolean has no infinity to lose). Everything else is 1.0's.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import forward_function, rebind_globals
from spyre_adapters.library.host_mask import (
    _SUPPORTED_ATTENTION,
    HostMask,
    _attention_implementation,
    _host_factory,
    _skip_is_full,
    _targets,
)

__all__ = ["HostMaskBool", "adapter", "reads_mask_as_bool"]

#: ``attention_mask`` read as a boolean: negated, ``logical_not``-ed or a ``masked_fill`` mask.
_BOOLEAN_USE = re.compile(
    r"attention_mask\s*\)?\s*\.logical_not\(|~\s*\(?\s*attention_mask\b"
    r"|masked_fill_?\(\s*~?\s*\(?\s*attention_mask\b"
)


@functools.lru_cache(maxsize=1024)
def _source_reads_bool(fn: types.FunctionType) -> bool:
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return _BOOLEAN_USE.search(source) is not None


def reads_mask_as_bool(module: nn.Module) -> bool:
    """Whether the forward of ``module`` or of a module below it reads its ``attention_mask``
    as a boolean (see the module docstring)."""
    for sub in module.modules():
        fn = forward_function(sub)
        if fn is not None and _source_reads_bool(fn):
            return True
    return False


def _bool_kept(stock: Callable[..., Any], skip_is_full: bool) -> Callable[..., Any]:
    """1.0's host factory of ``stock``, returning the mask as a boolean where ``stock`` does:
    the additive mask 1.0 makes of a boolean one is ``where(mask, 0, fill)``, so the boolean
    is exactly where it is 0."""
    returned_bool = [False]

    @functools.wraps(stock)
    def recording(*args: Any, **kwargs: Any) -> Any:
        mask = stock(*args, **kwargs)
        returned_bool[0] = isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
        return mask

    additive = _host_factory(recording, skip_is_full)

    @functools.wraps(additive)
    def factory(*args: Any, **kwargs: Any) -> Any:
        returned_bool[0] = False
        mask = additive(*args, **kwargs)
        if returned_bool[0] and isinstance(mask, torch.Tensor) and mask.is_floating_point():
            return mask == 0
        return mask

    return factory


class HostMaskBool(HostMask):
    """``host-mask`` 1.1 (see the module docstring)."""

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
            overrides = {
                name: factories.setdefault((id(owner), name, full, keep), make(owner[name], full))
                for name in names
            }
            edit.bind_forward(module, rebind_globals(fn, owner, overrides))


adapter = HostMaskBool()
