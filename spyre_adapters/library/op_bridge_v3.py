"""Op bridges, third form: the second form's, with a ``host-float32`` candidate.

The ``host`` candidate (:mod:`spyre_adapters.library.op_bridge`) runs the op on the CPU on the
tensors the device hands it, in their dtype: fp16 and bf16 with the strides of the device's
views. PyTorch's CPU kernels at half precision are not all safe with such strides: its fp16
``grid_sampler_2d`` returns NaN for a fifth of the samples of a (4, 16, 32, 32) input whose
channels are a strided slice of a wider row (Mask2Former's multi-scale deformable attention
at batch size one: ``value.flatten(2).transpose(1, 2).reshape(...)`` is a view there), and
the same call on a contiguous copy returns none. The NaN then entered the device as ``-inf``
(gap ``nan-entry``), and the pixel decoder's output came back wrong by 0.5 on values of 0.5,
with nothing counted.

``host-float32`` runs the op on contiguous float32 copies of the fp16/bf16 inputs (exact
conversions) and casts its floating results back to the dtype of the op's first floating
input: the op as the stock model computes it on the CPU, rounded once into the device's
dtype. Ops that write an input in place are not taken (their writes would land in the copies):
for those the call stays refused, with the release's own error.

:class:`OpBridge` is the second form's adapter (:mod:`spyre_adapters.library.op_bridge_v2`:
candidates installed as refusal handlers of the device) over this form's candidates: the
first form's (:data:`~spyre_adapters.library.op_bridge.CANDIDATES`) and ``host-float32``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_map

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import op_bridge, op_bridge_v2
from spyre_adapters.library._scoped_modes import enable, register_kind

__all__ = ["CANDIDATES", "KIND", "OpBridge", "candidate", "host_float32"]

KIND = "op-bridge-refusals-v3"

_HALF = (torch.float16, torch.bfloat16)


def _writes(op: OpOverload) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)


def host_float32(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """``op`` on the CPU on contiguous float32 copies of its fp16/bf16 device inputs (integer
    tensors widened to int64, as the ``host`` candidate does), its floating results cast back
    to the dtype of its first floating input and moved back to the device."""
    device = op_bridge._device_of(args, kwargs)
    if device is None:  # already on the host (a CPU run of the adapted model)
        return op(*args, **kwargs)
    if _writes(op):
        raise NotImplementedError(f"{op} writes an input in place: not a host-float32 call")
    dtypes: list[torch.dtype] = []

    def to_host(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.device != device:
            return value
        host = value.to("cpu")
        if host.dtype is torch.int32:  # the device stores int64 as int32
            return host.to(torch.int64)
        if host.is_floating_point():
            dtypes.append(host.dtype)
            if host.dtype in _HALF:
                return host.to(torch.float32, memory_format=torch.contiguous_format)
        return host.contiguous()

    host_args, host_kwargs = tree_map(to_host, (list(args), dict(kwargs)))
    out = op_bridge.cpu_call(op, host_args, host_kwargs)
    back = dtypes[0] if dtypes else None

    def to_device(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if back is not None and value.is_floating_point() and value.dtype is not back:
            value = value.to(back)
        return value.to(device)

    return tree_map(to_device, out)


#: The candidates of this form: the first form's and ``host-float32``.
CANDIDATES: dict[str, op_bridge.Impl] = {**op_bridge.CANDIDATES, "host-float32": host_float32}


def candidate(op: OpOverload, name: str) -> op_bridge.Impl:
    """The implementation of candidate ``name`` for ``op`` (ValueError if it has none)."""
    if name == "host-float32":
        return host_float32
    if name not in CANDIDATES:
        raise ValueError(f"unknown bridge candidate {name!r}; known: {', '.join(CANDIDATES)}")
    return op_bridge.candidate(op, name)


@functools.cache
def _handlers(settings: frozenset[tuple[str, str]]) -> Mapping[OpOverload, Any]:
    table = {}
    for name, how in sorted(settings):
        op = op_bridge.resolve_op(name)
        table[op] = op_bridge_v2._handler(candidate(op, how))
    return table


def _factory(settings: frozenset[tuple[str, str]]) -> AbstractContextManager[None]:
    from spyre_sim.refusals import handling

    return handling(_handlers(settings))


register_kind(KIND, _factory)


class OpBridge(op_bridge_v2.OpBridge):
    """The second form's adapter over this form's candidates (``{"aten.grid_sampler_2d.default":
    "host-float32"}``); every op and candidate is checked when the adapter is built."""

    def __init__(self, table: Mapping[str, str]) -> None:
        if not table:
            raise ValueError("an op bridge needs at least one op")
        for name, how in table.items():
            candidate(op_bridge.resolve_op(name), how)
        self.table = dict(sorted(table.items()))

    def apply(self, model: torch.nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, KIND, frozenset(self.table.items()))

    @staticmethod
    def apply_together(
        adapters: Sequence[op_bridge_v2.OpBridge], model: torch.nn.Module, edit: ModelEdit
    ) -> None:
        """Apply several bridges of this form at once (see the second form's)."""
        settings = frozenset(item for adapter in adapters for item in adapter.table.items())
        enable(model, edit, KIND, settings)
