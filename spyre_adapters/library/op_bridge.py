"""Single ATen ops bridged to a form the stack runs: a decomposition, a rewrite, or the host.

When a release cannot lower an op a model reaches (``aten.isinf`` in T5's overflow clamp, the
``nll_loss`` of a forward with labels, the ``sort`` and ``histc`` of MoE routing), the op can
often be expressed in ops the release does lower -- PyTorch's own decomposition tables hold
such forms for hundreds of ops -- or, as the last resort real teams use for MoE routing, run on
the host with its inputs and results moved explicitly (two transfers, counted by the device like
any other). An :class:`OpBridge` adapter runs the model's forwards under a
``TorchDispatchMode`` that computes each call of a listed op that the release refuses with
the op's chosen **candidate**; the calls the release lowers (an op may be refused only for some
dtypes, as casts to fp32 are before 2026.07) and every other op run as they would without the
bridge. The candidates, in the order ``spyre-adapters bridge`` tries them (:data:`CANDIDATES`):

- ``decomposition``: the op's entry in ``torch._decomp.decomposition_table``, run eagerly;
- ``core-decomposition``: its entry in ``torch._decomp.core_aten_decompositions()`` (the core
  ATen opset's table), where that is another function;
- ``ref``: the Python reference of ``torch._refs`` of the same name, run eagerly;
- ``rewrite``: a hand-written rewrite into elementwise ops, comparisons and reductions
  (:mod:`spyre_adapters.library._op_rewrites`);
- ``host``: the op runs on the CPU on copies of its device inputs (integer tensors widened back
  to int64, which the device stores as int32: a value-preserving cast); its results move back
  to the device, and inputs the op writes in place are written back (copied into the device
  tensor).
  Where the CPU kernel does not take a dtype (``histc`` of integers, some half-precision
  kernels), it runs at the nearest wider dtype and its results are cast back
  (:func:`cpu_call`), which is what the same op computes on an accelerator that has it.

A call that asks for its result on another device (``x.to("cpu")``: ``aten._to_copy`` with a
``device``) is a transfer and is never bridged.

Every op a decomposition, reference or rewrite issues reaches the device and is judged by the
release like any other op; one that is itself in the table is computed with its own candidate
(so ``nll_loss`` may decompose into a ``gather`` that runs on the host). Which candidate
holds for an op at a release is found and validated by ``spyre-adapters bridge``
(:mod:`spyre_adapters.enablement.bridge`), which writes the table of a generated adapter. The mode is a
scoped mode of kind ``op-bridge`` (:mod:`spyre_adapters.library._scoped_modes`), so ``restore``
takes it back with the rest of the edit. Matched by structure: any model, since a bridged op
changes nothing where the model never reaches it.

:func:`observe` lets a caller see the arguments of every bridged call while a block runs
(``spyre-adapters bridge`` re-validates an installed bridge on a family's own inputs so).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._op_rewrites import REWRITES
from spyre_adapters.library._scoped_modes import enable, register_kind

__all__ = [
    "CANDIDATES",
    "KIND",
    "BridgeMode",
    "OpBridge",
    "available",
    "candidate",
    "cpu_call",
    "observe",
    "op_name",
    "resolve_op",
]

KIND = "op-bridge"

Impl = Callable[[OpOverload, Sequence[Any], Mapping[str, Any]], Any]
Observer = Callable[[OpOverload, Sequence[Any], Mapping[str, Any]], None]
_observers: list[Observer] = []


def resolve_op(name: str) -> OpOverload:
    """``"aten.isinf.default"`` -> ``torch.ops.aten.isinf.default`` (ValueError if none)."""
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    except (AttributeError, RuntimeError):
        raise ValueError(f"no ATen op named {name!r}") from None
    if not isinstance(op, OpOverload):
        raise ValueError(f"{name!r} is not an op overload")
    return op


def op_name(op: OpOverload) -> str:
    """``torch.ops.aten.isinf.default`` -> ``"aten.isinf.default"``."""
    namespace, _, packet = op._schema.name.partition("::")
    return f"{namespace}.{packet}.{op._overloadname}"


def _device_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> torch.device | None:
    found: list[torch.device] = []

    def look(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            found.append(value.device)
        return value

    tree_map(look, (list(args), dict(kwargs)))
    return found[0] if found else None


# -- the CPU kernel, at a wider dtype where it has none for the given one -----------------------

_NOT_FOR = re.compile(r"not implemented for '(\w+)'")
_DTYPE_NAMES = {
    "Half": torch.float16,
    "BFloat16": torch.bfloat16,
    "Int": torch.int32,
    "Long": torch.int64,
    "Short": torch.int16,
    "Char": torch.int8,
    "Byte": torch.uint8,
    "Bool": torch.bool,
}


def _wants_long(message: str) -> bool:
    """The CPU kernel asks for int64 index arguments ("expected scalar type Long but found
    Int", "expected target dtype to be Long or Byte, but got Int")."""
    return "Long" in message and "Int" in message


def _wider(dtype: torch.dtype, message: str) -> torch.dtype | None:
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if _wants_long(message) and dtype is torch.int32:
        return torch.int64  # index arguments: the CPU kernels want int64
    if dtype in (torch.int32, torch.int16, torch.int8, torch.uint8, torch.int64, torch.bool):
        return torch.float64  # exact for every int32 value
    return None


def cpu_call(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """``op`` on CPU arguments. When the CPU kernel refuses a dtype (``"... not implemented for
    'Int'"``, ``"expected scalar type Long but found Int"``), the tensors of that dtype are
    widened (half/bfloat16 -> float32, int32 index arguments -> int64, other integers and bool
    -> float64) and results of the wider dtype are cast back (int64 results of index
    arguments excepted); any other error is raised."""
    try:
        return op(*args, **kwargs)
    except (RuntimeError, NotImplementedError) as error:
        message = str(error)
        named = _NOT_FOR.search(message)
        refused = (
            _DTYPE_NAMES.get(named.group(1))
            if named
            else torch.int32
            if _wants_long(message)
            else None
        )
        wide = _wider(refused, message) if refused is not None else None
        if refused is None or wide is None:
            raise

    def widen(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype is refused:
            return value.to(wide)
        return value

    wide_args, wide_kwargs = tree_map(widen, (list(args), dict(kwargs)))
    out = op(*wide_args, **wide_kwargs)
    if wide is torch.int64:
        return out  # index dtypes: the results are what the kernel gives

    def narrow(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype is wide:
            return value.to(refused)
        return value

    return tree_map(narrow, out)


def _written(op: OpOverload) -> list[tuple[int, str]]:
    """``(position, name)`` of the arguments ``op`` writes in place."""
    return [
        (index, argument.name)
        for index, argument in enumerate(op._schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    ]


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
    out = cpu_call(op, host_args, host_kwargs)
    written: dict[int, torch.Tensor] = {}  # id(host copy) -> the device tensor it came from
    for index, name in _written(op):
        if index < len(args):
            original, copy = args[index], host_args[index]
        elif name in kwargs:
            original, copy = kwargs[name], host_kwargs[name]
        else:
            continue
        if isinstance(original, torch.Tensor) and isinstance(copy, torch.Tensor):
            original.copy_(copy)  # the write the op made, on the device's tensor
            written[id(copy)] = original

    def to_device(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) in written:
            return written[id(value)]
        return value.to(device)

    return tree_map(to_device, out)


@functools.cache
def _core_table() -> Mapping[OpOverload, Callable[..., Any]]:
    from torch._decomp import core_aten_decompositions

    return dict(core_aten_decompositions())


def _decomposition_impl(op: OpOverload) -> Callable[..., Any] | None:
    from torch._decomp import decomposition_table

    found: Callable[..., Any] | None = decomposition_table.get(op)
    return found


def _core_impl(op: OpOverload) -> Callable[..., Any] | None:
    core = _core_table().get(op)
    if core is None or core is _decomposition_impl(op):
        return None  # the same function as the decomposition candidate: nothing new to try
    return core


def _ref_impl(op: OpOverload) -> Callable[..., Any] | None:
    import torch._refs as refs

    packet = op._schema.name.partition("::")[2]
    if op._schema.name.partition("::")[0] != "aten" or op._overloadname not in ("default", ""):
        return None
    found = getattr(refs, packet, None)
    return found if callable(found) else None


def _rewrite_impl(op: OpOverload) -> Callable[..., Any] | None:
    return REWRITES.get(op_name(op))


def _through(find: Callable[[OpOverload], Callable[..., Any] | None]) -> Impl:
    def run(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        function = find(op)
        if function is None:
            raise ValueError(f"{op} has no such candidate")
        return function(*args, **kwargs)

    return run


#: Candidate forms, in the order ``spyre-adapters bridge`` tries them: name -> (finder, impl).
#: A finder returns ``None`` when the candidate has nothing for the op.
_FINDERS: dict[str, Callable[[OpOverload], Callable[..., Any] | None]] = {
    "decomposition": _decomposition_impl,
    "core-decomposition": _core_impl,
    "ref": _ref_impl,
    "rewrite": _rewrite_impl,
}
CANDIDATES: dict[str, Impl] = {
    **{name: _through(find) for name, find in _FINDERS.items()},
    "host": _host,
}


def available(op: OpOverload) -> list[str]:
    """The candidates that have a form for ``op``, in the order they are tried (``host``,
    always available, last)."""
    return [name for name, find in _FINDERS.items() if find(op) is not None] + ["host"]


def candidate(op: OpOverload, name: str) -> Impl:
    """The implementation of candidate ``name`` for ``op`` (ValueError if it has none)."""
    if name not in CANDIDATES:
        raise ValueError(f"unknown bridge candidate {name!r}; known: {', '.join(CANDIDATES)}")
    if name == "decomposition" and _decomposition_impl(op) is None:
        raise ValueError(f"{op} has no entry in torch._decomp's decomposition table")
    if name != "host" and _FINDERS[name](op) is None:
        raise ValueError(f"{op} has no {name} candidate")
    return CANDIDATES[name]


def _refused(error: Exception, func: OpOverload) -> bool:
    """``error`` is the release refusing ``func`` itself: a lowering error for this op that is
    not a layout rule (a layout rule is not an op's form: no candidate changes it)."""
    from spyre_sim.errors import SpyreLayoutError, SpyreLoweringError

    return (
        isinstance(error, SpyreLoweringError)
        and not isinstance(error, SpyreLayoutError)
        and error.op == op_name(func)
    )


def _moves(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """The call asks for its result on another device (``x.to("cpu")`` is ``aten._to_copy``
    with ``device=cpu``): a transfer, never bridged (its result must land where it is asked)."""
    wanted = kwargs.get("device")
    if wanted is None:
        return False
    device = _device_of(args, {})
    return device is None or torch.device(wanted).type != device.type


@contextmanager
def observe(observer: Observer) -> Iterator[None]:
    """Call ``observer(op, args, kwargs)`` before each bridged call while the block runs."""
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)


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
        if impl is None or _moves(args, kwargs or {}):
            return func(*args, **(kwargs or {}))
        try:  # a call the release lowers runs as it would without the bridge
            return func(*args, **(kwargs or {}))
        except Exception as error:
            if not _refused(error, func):
                raise
            refusal = error
        for observer in list(_observers):
            observer(func, args, kwargs or {})
        others = {op: other for op, other in self.table.items() if op is not func}
        try:
            if impl is _host or not others:
                result = impl(func, args, kwargs or {})
            else:
                with BridgeMode(others):  # a decomposition may issue another bridged op
                    result = impl(func, args, kwargs or {})
        except NotImplementedError:
            # the candidate has no form for these arguments (a rewrite of some exponents
            # only): the call stays refused, with the release's own error
            raise refusal from None
        return result


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
