"""The op hot path: every ATen op on a ``spyre`` tensor, from ``__torch_dispatch__`` to its result.

1. per-op facts are built once and cached in ``_INFO`` keyed by the OpOverload
   (:class:`~spyre_sim._op_info.OpInfo`);
2. arguments are unwrapped to host tensors (:mod:`spyre_sim._host_arguments`); a non-scalar
   CPU tensor is a device-mismatch error;
3. the *verdict* (:mod:`spyre_sim._lowering`) comes from a cache keyed by the stack/settings
   generation and, only for ops that have an active shape rule, the dtypes and shapes (plus
   non-tensor arguments for rules that read them): that cache is this module's;
4. the op runs on the host tensors (or falls back to the CPU, or is reproduced wrong); its
   results are stored the way the device stores them and wrapped
   (:mod:`spyre_sim._op_results`).

A call of an op with a refusal handler installed (:mod:`spyre_sim.refusals`: an op bridge)
that the release refuses is computed by that handler.

Ops with a registered handler (:mod:`spyre_sim._special_ops`: transfers, copies, scalar
reads) go to it instead; it calls :func:`run` for the part that is an ordinary op. Ops of the
harness (:mod:`spyre_sim.scope`) run without a verdict.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload

# module imports, not names: _tensor imports this module, and these modules import _tensor
from spyre_sim import (
    _host_arguments,
    _lowering,
    _modules,
    _nan_made,
    _op_info,
    _op_results,
    _storage,
    _wide_arithmetic,
    _wide_values,
    layout,
    limits,
    refusals,
    scope,
    telemetry,
)
from spyre_sim._tensor import SpyreTensor, nbytes
from spyre_sim.catalogue import Decision
from spyre_sim.errors import SpyreFallbackWarning
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack, stack_generation
from spyre_sim.state import device_state

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

_out_args = device_state.out_args  # out= tensors of the op being finished (set by run)
_warned_fallbacks = device_state.warned_fallbacks
_handlers = device_state.refusal_handlers  # op -> handler of its refused calls (refusals)


_INFO: dict[OpOverload, OpInfo] = {}


def dispatch(func: OpOverload, args: Sequence[Any], kwargs: dict[str, Any] | None) -> Any:
    info = _INFO.get(func)
    if info is None:
        info = _INFO[func] = _op_info.OpInfo(func)
    if _handlers and func in _handlers:
        out = refusals.call(
            func, lambda: _dispatch_one(func, info, args, kwargs), args, kwargs or {}, info.name
        )
    else:
        out = _dispatch_one(func, info, args, kwargs)
    if device_state.limit_met:  # an emulator limit was met: note what the device writes now
        limits.note_written(info, out)
    return out


def _dispatch_one(
    func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> Any:
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
        hargs = _host_arguments.unwrap(args, info, sig)
        hkwargs = _host_arguments.unwrap_kwargs(kwargs, info, sig)
        key = _args_key(args, kwargs, sig) if info.uses_args else tuple(sig)
        verdict = info.cache.get(key)
        if verdict is None:
            verdict = info.cache[key] = _lowering.decide(info, hargs, hkwargs)
    else:
        hargs = _host_arguments.unwrap(args, info, None)
        hkwargs = _host_arguments.unwrap_kwargs(kwargs, info, None)
        if verdict is None:
            verdict = _first_decision(info, gen, args, kwargs, hargs, hkwargs)
    if info.wide_index:
        hargs = _host_arguments.widened(hargs, info.wide_index)

    if verdict.error is not None:
        gap, reason, cls = verdict.error
        sig2 = [(h.dtype, tuple(h.shape)) for h in _host_arguments.host_tensors(hargs)]
        raise _lowering.make_error(current_stack(), info.name, gap, reason, sig2, cls,
                          op_rule=verdict.decision is Decision.UNSUPPORTED and verdict.by_op_rule)  # fmt: skip

    if verdict.decompose:
        # a composite op that reached the device whole (e.g. under inference_mode): its
        # decomposition dispatches the ops the catalogue knows
        return func.decompose(*args, **(kwargs or {}))
    telemetry.count_op(info.name, verdict.value)
    if info.watch is not None and settings.numerics:
        ties = info.watch(hargs, hkwargs)
        if ties:
            telemetry.count_rounding_ties(info.packet, _modules.current_module_path(), ties)
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
    hargs = _host_arguments.unwrap(args, info, None)
    hkwargs = _host_arguments.unwrap_kwargs(kwargs, info, None)
    if info.wide_index:
        hargs = _host_arguments.widened(hargs, info.wide_index)
    telemetry.count_op(info.name, HARNESS)
    if device_state.wide_seen and _wide_values.carried(args, kwargs):
        done = _wide_values.call(func, info, args, kwargs or {})
        if done is not NotImplemented:
            return done
    if kwargs and info.out_args:
        for index, name in info.out_args:
            _out_args[index] = kwargs.get(name)
        try:
            return _op_results.finish(info, args, _host_call(info, hargs, hkwargs))
        finally:
            _out_args.clear()
    return _op_results.finish(info, args, _host_call(info, hargs, hkwargs))


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
    if device_state.wide_seen and _wide_values.carried(args, kwargs):
        if verdict.decision is Decision.FALLBACK:
            _wide_values.lost(info, args, kwargs)  # the held values go to the host
        else:
            done = _wide_values.call(func, info, args, kwargs or {})
            if done is not NotImplemented:
                if verdict.miscompiles or verdict.marks:
                    return _wide_checked(info, verdict, args, kwargs or {}, done)
                return done
    if verdict.decision is Decision.FALLBACK:
        return _fallback(func, info, verdict, args, hargs, hkwargs)
    clean_before = _nan_made.clean(hargs) if info.makes_nan and info.mutated else None
    computed = NotImplemented
    if (
        info.wide is not None
        and settings.numerics
        and (verdict.decision is Decision.NATIVE or not _wide_arithmetic.fused(info))
    ):
        computed = _wide_arithmetic.call(info, hargs, hkwargs)  # rounded to DL16 once
    rounded = computed is not NotImplemented
    kept = None
    if rounded:
        out, kept = computed
    else:
        out = info.call(*hargs, **hkwargs)  # the C++ op, without OpOverload.__call__
    if info.makes_nan and _nan_made.made_nan(out, [*hargs, *hkwargs.values()], clean_before):
        telemetry.count_nan_made(info.packet, _modules.current_module_path())
    if not verdict.miscompiles and not verdict.marks:
        result = _op_results.finish(info, args, out, rounded=rounded)
        if kept is not None:
            _wide_values.attach_results(result, kept)
        return result
    checked, marks, unheld = _lowering.apply_miscompiles(verdict, args, kwargs or {}, out)
    if kept is not None and checked is not out:
        _wide_arithmetic.note_range()  # a reproduced miscompile worked on the held values
    if unheld is not None and checked is out:
        # right on the device, not held by the fp16 host tensor: computed again with its DL16
        # values kept (an op that wrote an input already wrote it: the loss is counted)
        done = NotImplemented
        if not info.mutated:
            done = _wide_values.call(func, info, args, kwargs or {})
        if done is not NotImplemented:
            return done
        _wide_values.note(unheld.limit)
    # a reproduction that leaves the result as it was (most calls) keeps its one rounding
    result = _op_results.finish(info, args, checked, rounded=rounded and checked is out)
    if kept is not None and checked is out:
        _wide_values.attach_results(result, kept)
    for attribute, value in marks:
        setattr(result, attribute, value)
    return result


def _wide_checked(
    info: OpInfo,
    verdict: _lowering.Verdict,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    result: Any,
) -> Any:
    """The verdict's miscompile reproductions and marks applied to a result of wide mode: a
    reproduction that changes it gives held values (the wide ones dropped, the loss counted;
    an in-place op's target holds the reproduction's values)."""
    results = result if isinstance(result, (list, tuple)) else (result,)
    held = [r._host if type(r) is SpyreTensor else r for r in results]
    out = type(result)(held) if isinstance(result, (list, tuple)) else held[0]
    checked, marks, _ = _lowering.apply_miscompiles(verdict, args, kwargs, out)  # DL16 kept
    if checked is not out:
        for r in results:
            wide = _wide_values.values_of(r) if type(r) is SpyreTensor else None
            limit = _wide_values.limit_of(wide) if wide is not None else None
            if limit is not None:
                _wide_values.note(limit)
                break
        if not info.mutated:
            return _op_results.finish(info, args, checked)
        changed = checked if isinstance(checked, (list, tuple)) else (checked,)
        for target, values in zip(results, changed, strict=True):
            if type(target) is SpyreTensor:
                target._host.copy_(values)
                _wide_values.drop(target)
        return result
    for attribute, value in marks:
        setattr(result, attribute, value)
    return result


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
        _host_arguments.unwrap(args, info, sig)
        _host_arguments.unwrap_kwargs(kwargs, info, sig)
        key = _args_key(args, kwargs, sig) if info.uses_args else tuple(sig)
        verdict = info.cache[key] = _lowering.decide(info, hargs, hkwargs)
        return verdict
    info.shape_gen = None
    verdict = _lowering.decide(info, hargs, hkwargs)
    info.verdict, info.verdict_gen = verdict, gen
    return verdict


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
    for h in _host_arguments.host_tensors(hargs):
        telemetry.count_transfer(False, nbytes(h))
    out = func(*hargs, **hkwargs)
    for h in _host_arguments.host_tensors(out if isinstance(out, (list, tuple)) else [out]):
        telemetry.count_transfer(True, nbytes(h))
    result = _op_results.finish(info, args, out)
    for h in _host_arguments.host_tensors(out if isinstance(out, (list, tuple)) else [out]):
        _storage.entered(h)  # the result entered the device
    return result
