"""Writes into a cut reach its source, also under functorch transforms (``torch.vmap``).

:mod:`spyre_adapters.library._cut_writes` decides whether a cut is a copy by comparing the
storages of the cut and its source. A tensor inside ``torch.vmap`` (a functorch
``BatchedTensor``) has no storage of its own: asking for it raises "Cannot access storage of
BatchedTensorImpl", so every forward that cut a tensor under ``vmap`` failed. PyTorch's
FlexAttention does that when it builds a block mask (``create_block_mask`` runs the mask
function under nested ``vmap``).

This mode (kind ``stick-layout-writes-2``; it sorts after ``stick-layout``, so it sees each call
first, as the first version does) compares the storages of the plain tensors that functorch's
wrappers hold instead, and otherwise behaves as the first version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spyre_adapters.library._cut_writes import _CUTS, _SOURCE, CutWrites, _basic, _index_of
from spyre_adapters.library._scoped_modes import register_kind

__all__ = ["KIND", "CutWritesUnwrapped"]

KIND = "stick-layout-writes-2"


def _storage(tensor: torch.Tensor) -> int:
    """Address of the storage of the plain tensor inside any functorch wrappers."""
    while torch._C._functorch.is_functorch_wrapped_tensor(tensor):
        tensor = torch._C._functorch.get_unwrapped(tensor)
    return int(tensor.untyped_storage().data_ptr())


class CutWritesUnwrapped(CutWrites):
    """:class:`CutWrites`, judging cuts of functorch-wrapped tensors (module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        target = args[0] if args else None
        wrapped = isinstance(target, torch.Tensor) and (
            torch._C._functorch.is_functorch_wrapped_tensor(target)
        )
        if func not in _CUTS or not wrapped:
            return super().__torch_function__(func, types, args, kwargs)
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        assert isinstance(target, torch.Tensor)
        if (
            isinstance(result, torch.Tensor)
            and result.numel()
            and target.numel()
            and _storage(result) != _storage(target)
            and (func is not torch.Tensor.__getitem__ or _basic(args[1]))
        ):
            setattr(result, _SOURCE, (target, _index_of(func, args, kwargs)))
        return result


def _factory(settings: frozenset[Any]) -> CutWritesUnwrapped:
    return CutWritesUnwrapped()


register_kind(KIND, _factory)
