"""Single ATen ops bridged to a form the stack runs: a decomposition, or the host.

When a release cannot lower an op a model reaches (``aten.isinf`` in T5's overflow clamp, the
``nll_loss`` of a forward with labels, the ``sort`` of MoE routing), the op can often be
expressed in ops the release does lower -- PyTorch's own decomposition tables hold such forms
for hundreds of ops -- or, as the last resort real teams use for MoE routing, run on the host
with its inputs and results moved explicitly (two transfers, counted by the device like any
other). An :class:`OpBridge` adapter runs the model's forwards under a ``TorchDispatchMode``
that computes each listed op with its chosen **candidate** and leaves every other op alone:

- ``decomposition``: the op's entry in ``torch._decomp``'s decomposition table, run eagerly;
  the ops it is made of reach the device and are judged by the release like any other;
- ``host``: the op runs on the CPU on copies of its device inputs (integer tensors widened back
  to int64, which the device stores as int32: a value-preserving cast), and its results move
  back to the device.

Which candidate holds for an op at a release is found and validated by ``spyre-adapters
bridge`` (:mod:`spyre_adapters.bridge`), which writes the table of a generated adapter. The
mode is a scoped mode of kind ``op-bridge`` (:mod:`spyre_adapters.library._scoped_modes`), so
``restore`` takes it back with the rest of the edit. Matched by structure: any model, since a
bridged op changes nothing where the model never reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._scoped_modes import enable, register_kind

__all__ = ["CANDIDATES", "KIND", "OpBridge", "candidate", "resolve_op"]

KIND = "op-bridge"

Impl = Callable[[OpOverload, Sequence[Any], Mapping[str, Any]], Any]


def resolve_op(name: str) -> OpOverload:
    """``"aten.isinf.default"`` -> ``torch.ops.aten.isinf.default`` (ValueError if none)."""
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    except AttributeError:
        raise ValueError(f"no ATen op named {name!r}") from None
    if not isinstance(op, OpOverload):
        raise ValueError(f"{name!r} is not an op overload")
    return op


def _device_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> torch.device | None:
    found: list[torch.device] = []

    def look(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            found.append(value.device)
        return value

    tree_map(look, (list(args), dict(kwargs)))
    return found[0] if found else None


def _host(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    device = _device_of(args, kwargs)
    if device is None:  # already on the host (a CPU run of the adapted model)
        return op(*args, **kwargs)

    def to_host(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.device != device:
            return value
        host = value.to("cpu")
        # the device stores int64 as int32; host kernels such as nll_loss insist on int64
        return host.to(torch.int64) if host.dtype is torch.int32 else host

    host_args, host_kwargs = tree_map(to_host, (list(args), dict(kwargs)))
    out = op(*host_args, **host_kwargs)

    def to_device(value: Any) -> Any:
        return value.to(device) if isinstance(value, torch.Tensor) else value

    return tree_map(to_device, out)


def _decomposition(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    from torch._decomp import decomposition_table

    return decomposition_table[op](*args, **kwargs)


#: Candidate forms, in the order ``spyre-adapters bridge`` tries them.
CANDIDATES: dict[str, Impl] = {"decomposition": _decomposition, "host": _host}


def candidate(op: OpOverload, name: str) -> Impl:
    """The implementation of candidate ``name`` for ``op`` (ValueError if it has none)."""
    if name not in CANDIDATES:
        raise ValueError(f"unknown bridge candidate {name!r}; known: {', '.join(CANDIDATES)}")
    if name == "decomposition":
        from torch._decomp import decomposition_table

        if op not in decomposition_table:
            raise ValueError(f"{op} has no entry in torch._decomp's decomposition table")
    return CANDIDATES[name]


class BridgeMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Computes the listed ops with their candidates (see the module docstring)."""

    def __init__(self, table: Mapping[OpOverload, Impl]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.table = dict(table)

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        impl = self.table.get(func)
        if impl is None:
            return func(*args, **(kwargs or {}))
        return impl(func, args, kwargs or {})


def _factory(settings: frozenset[tuple[str, str]]) -> BridgeMode:
    table = {}
    for name, how in sorted(settings):
        op = resolve_op(name)
        table[op] = candidate(op, how)
    return BridgeMode(table)


register_kind(KIND, _factory)


class OpBridge:
    """An adapter bridging the ops of ``table`` (``{"aten.isinf.default": "decomposition"}``)
    with their candidates; every op and candidate is checked when the adapter is built."""

    def __init__(self, table: Mapping[str, str]) -> None:
        if not table:
            raise ValueError("an op bridge needs at least one op")
        for name, how in table.items():
            candidate(resolve_op(name), how)
        self.table = dict(sorted(table.items()))

    def matches(self, model: torch.nn.Module) -> bool:
        return True

    def apply(self, model: torch.nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, KIND, frozenset(self.table.items()))

    def __repr__(self) -> str:
        return f"OpBridge({self.table!r})"
