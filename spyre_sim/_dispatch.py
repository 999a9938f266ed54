"""The op hot path: every ATen op on a ``spyre`` tensor, from ``__torch_dispatch__`` to its result.

1. per-op facts (name, packet, which returns are fresh/views/mutated inputs, a special-op
   handler or host kernel registered for it) are built once and cached in ``_INFO`` keyed by
   the OpOverload (:class:`OpInfo`);
2. arguments are unwrapped by hand (no pytree) for the shapes ATen uses: tensors, lists of
   tensors, scalars; a non-scalar CPU tensor is a device-mismatch error;
3. the *verdict* (:mod:`spyre_sim._lowering`) comes from a cache keyed by the stack/settings
   generation and, only for ops that have an active shape rule, the dtypes and shapes (plus
   non-tensor arguments for rules that read them);
4. the op runs on the host tensors; fresh fp16 results (and mutated inputs) are rounded to
   DL16 in place, fp32/int64 results are stored as fp16/int32; results are wrapped.

Ops with a registered handler (:mod:`spyre_sim._special_ops`: transfers, copies, scalar
reads) go to it instead; it calls :func:`run` for the part that is an ordinary op.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from spyre_sim import (
    _host_kernels,
    _lowering,
    _modules,
    _special_ops,
    _storage,
    layout,
    scope,
    telemetry,
)
from spyre_sim._tensor import SpyreTensor, nbytes, wrap
from spyre_sim.catalogue import Decision
from spyre_sim.errors import SpyreFallbackWarning
from spyre_sim.numerics import round_to_dl16_
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack, stack_generation
from spyre_sim.state import device_state

_HOST = torch.device("cpu")
_out_args = device_state.out_args  # out= tensors of the op being finished (set by run)
_warned_fallbacks = device_state.warned_fallbacks


class OpInfo:
    """Facts about one OpOverload, built once."""

    __slots__ = (
        "cache",
        "call",
        "fresh",
        "is_view",
        "mutated",
        "name",
        "out_args",
        "overload",
        "packet",
        "qualname",
        "rounds",
        "shape_gen",
        "special",
        "uses_args",
        "verdict",
        "verdict_gen",
        "wide_index",
    )

    def __init__(self, func: OpOverload) -> None:
        schema = func._schema
        self.packet = (
            "aten." + func._overloadpacket.__name__
            if func.namespace == "aten"
            else (f"{func.namespace}.{func._overloadpacket.__name__}")
        )
        self.overload = func._overloadname
        self.name = f"{self.packet}.{self.overload}"
        self.is_view = bool(func.is_view)
        self.call: Callable[..., Any] = func._op
        self.qualname = (
            f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
        )
        # returns: index of the input they alias and write (in-place/out=), or -1 if fresh,
        # or -2 if a view of an input (never rounded: rounding a view breaks aliasing)
        fresh: list[int] = []
        for ret in schema.returns:
            info = ret.alias_info
            if info is None:
                fresh.append(-1)
            elif info.is_write:
                idx = -2
                for i, a in enumerate(schema.arguments):
                    if (
                        a.alias_info is not None
                        and a.alias_info.is_write
                        and set(a.alias_info.before_set) == set(info.before_set)
                    ):
                        idx = i
                        break
                fresh.append(idx)
            else:
                fresh.append(-2)
        self.fresh = tuple(fresh)
        self.out_args = tuple(
            (i, a.name)
            for i, a in enumerate(schema.arguments)
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
        )
        self.mutated = tuple(
            i
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        )
        #: the handler of a special op (a transfer, a scalar read), or ``None``
        self.special = _special_ops.handler(self.packet)
        preserving = _storage.VALUE_PRESERVING
        self.rounds = self.name not in preserving and self.packet not in preserving
        kernel = _host_kernels.kernel(self.name)
        if kernel is not None:
            self.call = kernel.call
            self.rounds = not kernel.rounds_itself
        self.cache: dict[Any, _lowering.Verdict] = {}
        self.verdict: _lowering.Verdict | None = None
        self.verdict_gen: Any = None
        self.shape_gen: Any = None
        self.uses_args = False
        # positions of index arguments: the device stores int64 as int32, and host kernels such
        # as gather, scatter and index_copy_ insist on int64 indices (a value-preserving cast)
        self.wide_index = tuple(
            i
            for i, a in enumerate(schema.arguments)
            if a.name in _INDEX_ARGUMENTS
            and str(a.type) in ("Tensor", "Optional[Tensor]", "List[Optional[Tensor]]")
        )


_INFO: dict[OpOverload, OpInfo] = {}


_INDEX_ARGUMENTS = frozenset({"index", "indices", "target"})


def _widened(hargs: list[Any], positions: tuple[int, ...]) -> list[Any]:
    """``hargs`` with int32 tensors at ``positions`` (or in lists there) widened to int64."""
    for i in positions:
        if i >= len(hargs):
            continue
        value = hargs[i]
        if isinstance(value, torch.Tensor):
            if value.dtype is torch.int32:
                hargs[i] = value.to(torch.int64)
        elif isinstance(value, (list, tuple)):
            hargs[i] = type(value)(
                v.to(torch.int64) if isinstance(v, torch.Tensor) and v.dtype is torch.int32 else v
                for v in value
            )
    return hargs


_MISMATCH = (
    "Expected all tensors to be on the same device, but found at least two devices, "
    "spyre:0 and cpu!"
)


_CPU_INDEX_OK = frozenset(
    {"aten.index", "aten.index_put_", "aten.index_put", "aten._index_put_impl_"}
)


def _unwrap_list(items: Any, info: OpInfo, sig: list[Any] | None) -> Any:
    out = []
    for x in items:
        if type(x) is SpyreTensor:
            h = x._host
            if sig is not None:
                sig.append(h.dtype)
                sig.append(h.shape)
            out.append(h)
        elif isinstance(x, torch.Tensor) and x.dim() > 0 and info.packet not in _CPU_INDEX_OK:
            raise RuntimeError(f"{_MISMATCH} (in {info.name})")
        else:
            out.append(x)
    return out if isinstance(items, list) else tuple(out)


_HALF_MAX = float(torch.finfo(torch.float16).max)


def _unwrap(args: Sequence[Any], info: OpInfo, sig: list[Any] | None) -> list[Any]:
    out: list[Any] = []
    big = False
    for x in args:
        if type(x) is SpyreTensor:
            h = x._host
            if sig is not None:
                sig.append(h.dtype)
                sig.append(h.shape)
            out.append(h)
        elif isinstance(x, torch.Tensor):
            if x.dim() > 0 and info.packet not in _CPU_INDEX_OK:
                raise RuntimeError(f"{_MISMATCH} (in {info.name})")
            out.append(x)
        elif isinstance(x, (list, tuple)) and x and isinstance(x[0], torch.Tensor | None):
            out.append(_unwrap_list(x, info, sig))
        elif isinstance(x, torch.device) and x.type == "spyre":
            out.append(_HOST)
        else:
            if type(x) is float and not -_HALF_MAX <= x <= _HALF_MAX and x - x == 0.0:
                big = True  # finite, beyond fp16's range
            out.append(x)
    return _saturated(out) if big and settings.numerics else out


def _saturated(hargs: list[Any]) -> list[Any]:
    """Scalars beyond fp16's range, for an op on fp16 storage, saturated to its largest finite
    value. The device's DL16 saturates too (no infinity), at a wider range (about 8.6e9) than
    the fp16 host tensors that hold DL16 values here, so a ``fill_(-1e9)`` (beam search's
    running scores) stores -65504 instead of failing the host kernel: a documented limit of
    the emulation."""
    if not any(isinstance(h, torch.Tensor) and h.dtype is torch.float16 for h in hargs):
        return hargs
    return [
        max(-_HALF_MAX, min(_HALF_MAX, h)) if type(h) is float and h - h == 0.0 else h
        for h in hargs
    ]


def dispatch(func: OpOverload, args: Sequence[Any], kwargs: dict[str, Any] | None) -> Any:
    info = _INFO.get(func)
    if info is None:
        info = _INFO[func] = OpInfo(func)
    if info.special is not None:
        return info.special(func, info, args, kwargs or {})
    return run(func, info, args, kwargs)


def run(func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None) -> Any:
    if not settings.judge_harness and not scope.in_model_scope():
        return _run_harness(func, info, args, kwargs)
    gen = (stack_generation(), settings.generation)
    verdict = info.verdict if info.verdict_gen == gen else None
    if verdict is None and info.shape_gen == gen:
        # this op has an active shape/argument rule: key on dtypes, shapes (and arguments)
        sig: list[Any] = []
        hargs = _unwrap(args, info, sig)
        hkwargs = _unwrap_kwargs(kwargs, info, sig)
        key = _args_key(args, kwargs, sig) if info.uses_args else tuple(sig)
        verdict = info.cache.get(key)
        if verdict is None:
            verdict = info.cache[key] = _lowering.decide(info, hargs, hkwargs)
    else:
        hargs = _unwrap(args, info, None)
        hkwargs = _unwrap_kwargs(kwargs, info, None)
        if verdict is None:
            verdict = _first_decision(info, gen, args, kwargs, hargs, hkwargs)
    if info.wide_index:
        hargs = _widened(hargs, info.wide_index)

    if verdict.error is not None:
        gap, reason, cls = verdict.error
        sig2 = [(h.dtype, tuple(h.shape)) for h in _host_tensors(hargs)]
        raise _lowering.make_error(current_stack(), info.name, gap, reason, sig2, cls,
                          op_rule=verdict.decision is Decision.UNSUPPORTED and verdict.by_op_rule)  # fmt: skip

    if verdict.decompose:
        # a composite op that reached the device whole (e.g. under inference_mode): its
        # decomposition dispatches the ops the catalogue knows
        return func.decompose(*args, **(kwargs or {}))
    telemetry.count_op(info.name, verdict.value)
    if kwargs and info.out_args:  # out=: return the given tensor, as PyTorch does
        for index, name in info.out_args:
            _out_args[index] = kwargs.get(name)
        try:
            return _execute(func, info, verdict, args, kwargs, hargs, hkwargs)
        finally:
            _out_args.clear()
    return _execute(func, info, verdict, args, kwargs, hargs, hkwargs)


def _run_harness(
    func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> Any:
    """An op of the harness: the host kernel, stored the way the device stores results, no
    verdict (see :mod:`spyre_sim.scope`)."""
    hargs = _unwrap(args, info, None)
    hkwargs = _unwrap_kwargs(kwargs, info, None)
    if info.wide_index:
        hargs = _widened(hargs, info.wide_index)
    telemetry.count_op(info.name, HARNESS)
    if kwargs and info.out_args:
        for index, name in info.out_args:
            _out_args[index] = kwargs.get(name)
        try:
            return _finish(info, args, _host_call(info, hargs, hkwargs))
        finally:
            _out_args.clear()
    return _finish(info, args, _host_call(info, hargs, hkwargs))


def _host_call(info: OpInfo, hargs: list[Any], hkwargs: dict[str, Any]) -> Any:
    """A harness op on the host. The device stores fp32 as fp16, and some host kernels have no
    half version (``linalg.cholesky``, which Transformers' embedding resize runs): those
    compute in float32 on the host, as the harness would have on the CPU, and the result is
    stored back as the device stores it."""
    try:
        return info.call(*hargs, **hkwargs)
    except (NotImplementedError, RuntimeError) as error:
        if info.mutated or "not implemented for 'Half'" not in str(error):
            raise  # an in-place op must write the stored tensor itself

    def wide(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype is torch.float16:
            return value.float()
        if isinstance(value, (list, tuple)):
            return type(value)(wide(v) for v in value)
        return value

    out = info.call(*wide(hargs), **{k: wide(v) for k, v in hkwargs.items()})

    def narrow(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype is torch.float32:
            return value.half()
        if isinstance(value, (list, tuple)):
            return type(value)(narrow(v) for v in value)
        return value

    return narrow(out)


#: The decision value telemetry records for an op of the harness.
HARNESS = "harness"


def _execute(
    func: OpOverload,
    info: OpInfo,
    verdict: _lowering.Verdict,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None,
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> Any:
    if verdict.decision is Decision.FALLBACK:
        return _fallback(func, info, verdict, args, hargs, hkwargs)
    out = info.call(*hargs, **hkwargs)  # the C++ op, without OpOverload.__call__
    if not verdict.miscompiles and not verdict.marks:
        return _finish(info, args, out)
    out, marks = _lowering.apply_miscompiles(verdict, args, kwargs or {}, out)
    result = _finish(info, args, out)
    for attribute, value in marks:
        setattr(result, attribute, value)
    return result


def _unwrap_kwargs(
    kwargs: dict[str, Any] | None, info: OpInfo, sig: list[Any] | None
) -> dict[str, Any]:
    if not kwargs:
        return {}
    keys = list(kwargs)
    values = _unwrap([kwargs[k] for k in keys], info, sig)
    return dict(zip(keys, values, strict=True))


def _args_key(args: Sequence[Any], kwargs: dict[str, Any] | None, sig: list[Any]) -> Any:
    parts: list[Any] = list(sig)
    for a in args:
        if not isinstance(a, torch.Tensor):
            parts.append(_hashable(a))
    if kwargs:
        for k, v in kwargs.items():
            if not isinstance(v, torch.Tensor):
                parts.append((k, _hashable(v)))
    return tuple(parts)


def _hashable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) if not isinstance(x, torch.Tensor) else None for x in v)
    return v


def _host_tensors(hargs: Sequence[Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for a in hargs:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(b for b in a if isinstance(b, torch.Tensor))
    return out


def _first_decision(
    info: OpInfo,
    gen: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None,
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> _lowering.Verdict:
    """First call of an op at this generation: does it need per-shape decisions?"""
    release = current_stack()
    rule = release.op_rule(info.packet, info.overload)
    active = (
        layout.active_rules(release, info.packet, settings.layout_checks)
        if rule.decision.runs_on_device
        else ()
    )
    info.cache = {}
    if active:
        info.shape_gen = gen
        info.verdict_gen = None
        info.uses_args = any(r.uses_args for r in active)
        sig: list[Any] = []
        _unwrap(args, info, sig)
        _unwrap_kwargs(kwargs, info, sig)
        key = _args_key(args, kwargs, sig) if info.uses_args else tuple(sig)
        verdict = info.cache[key] = _lowering.decide(info, hargs, hkwargs)
        return verdict
    info.shape_gen = None
    verdict = _lowering.decide(info, hargs, hkwargs)
    info.verdict, info.verdict_gen = verdict, gen
    return verdict


def _finish(info: OpInfo, args: Sequence[Any], out: Any) -> Any:
    """Store results the way the device does and wrap them."""
    fresh = info.fresh
    rounds = info.rounds
    if type(out) is torch.Tensor:
        return _store_one(fresh[0] if fresh else -1, args, out, rounds)
    if isinstance(out, (tuple, list)):
        if len(fresh) == 1:  # Tensor[] return (split, unbind): all share the annotation
            how = fresh[0]
            return type(out)(
                _store_one(how, args, o, rounds) if isinstance(o, torch.Tensor) else o for o in out
            )
        return type(out)(
            _store_one(fresh[i] if i < len(fresh) else -1, args, o, rounds)
            if isinstance(o, torch.Tensor)
            else o
            for i, o in enumerate(out)
        )
    return out


def _store_one(how: int, args: Sequence[Any], out: torch.Tensor, rounds: bool) -> Any:
    if how == -1:  # a fresh result: the device stores it
        if settings.numerics:
            dtype = out.dtype
            if dtype is torch.float16:
                if rounds:
                    round_to_dl16_(out)
            elif dtype in _storage.STORE_AS:
                out = _storage.to_device_storage(out, fresh=True)
        return wrap(out)
    if how >= 0:  # an input written in place (add_, copy_, out=): round where it is stored
        if settings.numerics and rounds and out.dtype is torch.float16:
            round_to_dl16_(out)
        target = args[how] if how < len(args) else _out_args.get(how)
        if type(target) is SpyreTensor:
            # the host op wrote target's host (or, for resize_, replaced it: _host_resize_)
            if (
                target._host is not out
                or target.shape != out.shape
                or target.stride() != out.stride()
            ):
                _adopt_metadata(target, out)
            return target  # in-place ops and out= return the tensor they wrote
        return wrap(out)
    return wrap(out)  # a view: never rounded


def _adopt_metadata(target: SpyreTensor, host: torch.Tensor) -> None:
    """Give ``target`` the sizes and strides of its host tensor, which the op resized in place.

    Factories such as ``arange(n, device="spyre")`` create an empty tensor and fill it with
    an ``out=`` op that resizes it (``resize_`` itself lands here too); the caller keeps the
    tensor it passed, so that very object must change shape. Assigning ``.data`` copies the
    metadata of a fresh wrapper into it (the Python object, and so ``_host``, stays)."""
    target.data = wrap(host)
    target._host = host


def _fallback(
    func: OpOverload,
    info: OpInfo,
    verdict: _lowering.Verdict,
    args: Sequence[Any],
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> Any:
    name = info.name
    if name not in _warned_fallbacks:
        _warned_fallbacks.add(name)
        warnings.warn(
            f"{name} is falling back to cpu",
            SpyreFallbackWarning,
            stacklevel=_storage.user_stacklevel(),
        )
    telemetry.count_fallback(name)
    if verdict.gap:
        telemetry.count_gap(verdict.gap, _modules.current_module_path())
    for h in _host_tensors(hargs):
        telemetry.count_transfer(False, nbytes(h))
    out = func(*hargs, **hkwargs)
    for h in _host_tensors(out if isinstance(out, (list, tuple)) else [out]):
        telemetry.count_transfer(True, nbytes(h))
    result = _finish(info, args, out)
    for h in _host_tensors(out if isinstance(out, (list, tuple)) else [out]):
        _storage.entered(h)  # the result entered the device
    return result
