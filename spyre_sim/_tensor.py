"""The ``spyre`` tensor (a wrapper subclass holding a host tensor) and the op hot path.

Every ATen op on a ``spyre`` tensor arrives in :func:`_dispatch` (``__torch_dispatch__``):

1. per-op facts (name, packet, which returns are fresh/views/mutated inputs) are built once
   and cached in ``_INFO`` keyed by the OpOverload;
2. arguments are unwrapped by hand (no pytree) for the shapes ATen uses: tensors, lists of
   tensors, scalars; a non-scalar CPU tensor is a device-mismatch error;
3. the *verdict* (decision + gap + error to raise + miscompile) comes from a cache keyed by
   the stack/settings generation and, only for ops that have an active shape rule, the dtypes
   and shapes (plus non-tensor arguments for rules that read them);
4. the op runs on the host tensors; fresh fp16 results (and mutated inputs) are rounded to
   DL16 in place, fp32/int64 results are stored as fp16/int32; results are wrapped.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from spyre_sim import _modules, hints, layout, miscompile, scope, telemetry
from spyre_sim.catalogue import Decision, GapState, Release, catalogue_for
from spyre_sim.errors import (
    InferenceOnlyError,
    SpyreDowncastWarning,
    SpyreFallbackWarning,
    SpyreLayoutError,
    SpyreLoweringError,
)
from spyre_sim.numerics import round_to_dl16_
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack, stack_generation

DEVICE = torch.device("meta")  # becomes torch.device("spyre", 0) in spyre_sim.device.register()
_HOST = torch.device("cpu")


_PROJECT_PACKAGES = ("spyre_sim", "spyre_adapters", "pytest_spyre")
_FLOAT_WIDE = (torch.float32, torch.float64)
_STORE_AS: dict[torch.dtype, torch.dtype] = {
    torch.float32: torch.float16,
    torch.float64: torch.float16,
    torch.int64: torch.int32,
}
_warned_dtypes: set[torch.dtype] = set()

#: Attribute of a device tensor made by a cast to float32/float64: the device stores its values
#: as DL16 (fp16), and moving it to the host gives them in the dtype cast to, so the common
#: ``out.float().cpu()`` comparison idiom sees float32 (the DL16 values, widened exactly).
READS_AS = "_spyre_reads_as"
_warned_fallbacks: set[str] = set()


class SpyreTensor(torch.Tensor):
    """A tensor on the emulated ``spyre`` device; ``_host`` holds its values on the CPU."""

    _host: torch.Tensor

    @staticmethod
    def __new__(cls, host: torch.Tensor) -> SpyreTensor:
        return _wrap(host)

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        text = repr(self._host)
        if text.endswith(")"):
            text = text[:-1] + ", device='spyre:0')"
        return text

    def tolist(self) -> Any:
        telemetry.count_transfer(False, _nbytes(self._host))
        return self._host.tolist()

    def __format__(self, format_spec: str) -> str:
        # torch formats a 0-dim tensor through .item() only for exact torch.Tensor
        if self.dim() == 0:
            telemetry.count_transfer(False, _nbytes(self._host))
            return format(self._host.item(), format_spec)
        return object.__format__(self, format_spec)

    def untyped_storage(self) -> torch.UntypedStorage:
        """The storage holding this tensor's values: that of its host tensor. (A wrapper
        subclass has no storage of its own, and serialisers such as safetensors identify
        shared tensors by ``untyped_storage().data_ptr()``.)"""
        return self._host.untyped_storage()

    def data_ptr(self) -> int:
        """The address of the first element, in the host storage (see ``untyped_storage``)."""
        return int(self._host.data_ptr())

    def backward(self, *args: Any, **kwargs: Any) -> None:
        """Refused: the device is inference-only. (PyTorch's autograd engine would run the
        backward on a C++ device thread, which aborts the process for a Python backend; so
        ``torch.autograd.grad`` on spyre tensors must not be called either.)"""
        raise inference_only_error("backward()")

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["_host"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], meta: Any, outer_size: Any, outer_stride: Any
    ) -> SpyreTensor:
        return _wrap(inner["_host"])

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls,
        func: OpOverload,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return _dispatch(func, args, kwargs)


def _wrap(host: torch.Tensor) -> SpyreTensor:
    t: SpyreTensor = torch.Tensor._make_wrapper_subclass(
        SpyreTensor,
        host.shape,
        strides=host.stride(),
        storage_offset=host.storage_offset(),
        dtype=host.dtype,
        device=DEVICE,
        requires_grad=False,
    )
    t._host = host
    return t


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def memory_allocated() -> int:
    """Bytes of the host storages behind live ``spyre`` tensors (each storage once).

    Found by a scan of the garbage collector's objects when asked, so that the op hot path
    keeps no registry (and no weak reference: ``swap_tensors`` refuses weak-referenced
    tensors, and ``model.to`` swaps parameters). A scan costs milliseconds."""
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        if type(obj) is SpyreTensor:
            storage = obj._host.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


# --- storage conversions --------------------------------------------------------------------


_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = (
    os.path.dirname(torch.__file__ or "torch") + os.sep,
    *(os.path.join(_PROJECT, name) + os.sep for name in _PROJECT_PACKAGES),
)


def _user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning to the first frame outside torch and this
    project's packages (the model or test line whose op met the device), for the function
    that calls ``warnings.warn``. Only computed when a once-per-process warning is issued."""
    frame = sys._getframe(1)  # the caller of warnings.warn
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def storage_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the device stores for ``dtype`` (fp32 -> fp16, int64 -> int32) when numerics
    emulation is on; unchanged otherwise."""
    if not settings.numerics:
        return dtype
    stored = _STORE_AS.get(dtype, dtype)
    if stored is not dtype and dtype not in _warned_dtypes:
        _warned_dtypes.add(dtype)
        warnings.warn(
            f"the spyre device does not store {dtype}: stored as {stored} "
            "(warned once per process; spyre_sim.configure(numerics=False) keeps host dtypes)",
            SpyreDowncastWarning,
            stacklevel=_user_stacklevel(),
        )
    return stored


def to_device_storage(host: torch.Tensor, fresh: bool) -> torch.Tensor:
    """What the device stores for a host tensor: dtype conversion and DL16 rounding.
    ``fresh``: ``host`` is owned by the caller and may be rounded in place."""
    if not settings.numerics:
        return host
    dtype = host.dtype
    if dtype is torch.float16:
        if not fresh:
            host = host.clone()
        return round_to_dl16_(host)
    stored = _STORE_AS.get(dtype)
    if stored is not None:
        converted = host.to(storage_dtype(dtype))
        if stored is torch.float16:
            round_to_dl16_(converted)
        return converted
    return host


def host_to_device(src: torch.Tensor) -> SpyreTensor:
    """Move a CPU tensor to the device (a transfer): checks, conversions, telemetry."""
    _check_transfer(src)
    telemetry.count_transfer(True, _nbytes(src))
    return _wrap(to_device_storage(src.detach().clone(), fresh=True))


def _judged() -> bool:
    """Whether the op being run now gets a verdict: always with ``settings.judge_harness``,
    else only inside the model scope (:mod:`spyre_sim.scope`)."""
    return settings.judge_harness or scope.in_model_scope()


def _check_transfer(src: torch.Tensor) -> None:
    release = current_stack()
    if not _judged():  # the harness moves it: stored as the device stores it, never refused
        _count_storage_gaps(src)
        return
    if src.dtype is torch.bool and _gap_open(release, "bool-storage"):
        _raise_gap(
            release,
            "aten._copy_from",
            "bool-storage",
            [src],
            "a bool tensor cannot be stored on the device (bool is stored as DL16 from 2026.02)",
            SpyreLoweringError,
        )
    if (
        settings.layout_checks
        and src.numel() == 0
        and src.dim() > 0
        and _gap_open(release, "zero-length")
    ):
        _raise_gap(
            release,
            "aten._copy_from",
            "zero-length",
            [src],
            f"a zero-length tensor {list(src.shape)} crashes the host->device copy",
            SpyreLayoutError,
        )
    _count_storage_gaps(src)


def _count_storage_gaps(src: torch.Tensor) -> None:
    """Storage properties that change the values moved (whoever moves them)."""
    if src.dtype in _FLOAT_WIDE and settings.numerics:
        telemetry.count_gap("fp32-storage", _modules.current_module_path())
    if src.is_floating_point() and src.numel() and bool(torch.isinf(src).any()):
        telemetry.count_gap("no-inf", _modules.current_module_path())


def _gap_open(release: Release, gap: str) -> bool:
    return release.gap_open(gap)  # an unknown gap id is a bug of ours: it raises


def _raise_gap(
    release: Release,
    op: str,
    gap: str,
    tensors: Sequence[torch.Tensor],
    reason: str,
    cls: type[SpyreLoweringError],
) -> None:
    raise _make_error(release, op, gap, reason, [(t.dtype, tuple(t.shape)) for t in tensors], cls)


def _training_step(model: torch.nn.Module | None) -> bool:
    """A training step runs: gradients on, the model in training mode with trainable
    parameters (a fresh module that was never put in eval mode but trains nothing is not)."""
    if model is None or not model.training or not torch.is_grad_enabled():
        return False
    return any(p.requires_grad for p in model.parameters())


def _make_error(
    release: Release,
    op: str,
    gap: str,
    reason: str,
    sig: Sequence[tuple[torch.dtype, tuple[int, ...]]],
    cls: type[SpyreLoweringError],
    *,
    op_rule: bool = False,
) -> SpyreLoweringError:
    """The error for ``op`` refused at ``release``; ``op_rule``: the op's own catalogue rule
    refused it (so where the op first runs at all is worth saying), not a layout or
    capability rule."""
    catalogue = catalogue_for(release)
    closes_in = catalogue.first_closing(gap, release.name)
    lasting = catalogue.gap(gap).lasting
    runs_from = None
    if op_rule and op.count(".") >= 2:
        packet, _, overload = op.rpartition(".")
        runs_from = catalogue.first_running(packet, release.name, overload)
    path = _modules.current_module_path()
    model = _modules.outermost()
    telemetry.count_gap(gap, path)
    telemetry.count_error(gap)
    error = cls(
        op=op,
        release=release.name,
        gap=gap,
        reason=reason,
        dtypes=[str(d).replace("torch.", "") for d, _ in sig],
        shapes=[tuple(s) for _, s in sig],
        closes_in=closes_in,
        lasting=lasting,
        module_path=path,
        runs_from=runs_from,
        in_training=_training_step(model),
    )
    hints.provide(error, model)
    return error


# --- per-op facts -------------------------------------------------------------------------


class _OpInfo:
    """Facts about one OpOverload, built once."""

    __slots__ = (
        "cache",
        "call",
        "fresh",
        "is_view",
        "kind",
        "mutated",
        "name",
        "out_args",
        "overload",
        "packet",
        "qualname",
        "rounds",
        "shape_gen",
        "uses_args",
        "verdict",
        "verdict_gen",
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
        self.kind = _KINDS.get(self.packet, "")
        self.rounds = self.name not in _VALUE_PRESERVING and self.packet not in _VALUE_PRESERVING
        host_kernel = _HOST_KERNELS.get(self.name)
        if host_kernel is not None:
            self.call = host_kernel
            self.rounds = self.name not in _ROUNDS_ITSELF
        self.cache: dict[Any, _Verdict] = {}
        self.verdict: _Verdict | None = None
        self.verdict_gen: Any = None
        self.shape_gen: Any = None
        self.uses_args = False


_KINDS = {
    "aten._to_copy": "to_copy",
    "aten.copy_": "copy",
    "aten._copy_from": "copy_from",
    "aten._copy_from_and_resize": "copy_from",
    "aten.lift_fresh": "lift",
    "aten.lift_fresh_copy": "lift",
    "aten._local_scalar_dense": "scalar",
    "aten.scaled_dot_product_attention": "",
}

_INFO: dict[OpOverload, _OpInfo] = {}

# Ops whose fp16 results are input values (moved, selected, negated): DL16 inputs give DL16
# results, so rounding them again would change nothing. Skipping it is the cheapest win.
_VALUE_PRESERVING = frozenset(
    {
        "aten.clone",
        "aten.cat",
        "aten.stack",
        "aten.neg",
        "aten.abs",
        "aten.relu",
        "aten.embedding",
        "aten.index_select",
        "aten.gather",
        "aten.index",
        "aten.repeat",
        "aten.flip",
        "aten.roll",
        "aten.amax",
        "aten.amin",
        "aten.max",
        "aten.min",
        "aten.maximum",
        "aten.minimum",
        "aten.where.self",
        "aten.expand_copy",
        "aten.permute_copy",
        "aten.transpose_copy",
        "aten.slice_copy",
        "aten.select_copy",
        "aten.topk",
        "aten.sort",
        "aten.tril",
        "aten.triu",
        "aten.copy_",
    }
)


# --- host kernels -----------------------------------------------------------------------------
# Ops the emulator runs with its own host code instead of the ATen kernel: a faster computation
# that gives the same bits (pow), or one that stores the result the way the device does without
# a round trip (_to_copy) or works around a host-only limit (resize_). The results must be
# those the ATen op plus the device's storage rules give (tests/sim/test_host_kernels.py and
# tests/sim/test_device.py check them).

_ATEN_POW = torch.ops.aten.pow.Tensor_Scalar
_ATEN_TO_COPY = torch.ops.aten._to_copy.default
_SQUARE_EXACT = (torch.float16, torch.bfloat16)


def _host_pow_scalar(x: torch.Tensor, exponent: Any) -> torch.Tensor:
    """``pow(x, 2)`` as ``x * x`` for half types: the host's fp16 ``pow`` kernel is ~15x
    slower than ``mul``, and both compute the square exactly in fp32 (11 + 11 significant
    bits fit in 24) and round it once to the same type, so the bits are the same."""
    if exponent == 2 and type(exponent) is not bool and x.dtype in _SQUARE_EXACT:
        return torch.mul(x, x)
    return _ATEN_POW(x, exponent)  # type: ignore[no-any-return]


def _host_to_copy(x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """``_to_copy`` that stores its result the way the device does, without a round trip:
    a DL16 (fp16) tensor cast to a type the device stores as fp16 (fp32, fp64) is stored as
    the same DL16 values, so the cast and the DL16 rounding are skipped; other casts to fp16
    (int32, bf16) are rounded here, since :func:`_store_one` does not round this op."""
    if settings.numerics and x.dtype is torch.float16:
        target = kwargs.get("dtype")
        if target is not None and _STORE_AS.get(target) is torch.float16:
            storage_dtype(target)  # the once-per-process downcast warning
            kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
        return _ATEN_TO_COPY(x, **kwargs)  # type: ignore[no-any-return]
    out: torch.Tensor = _ATEN_TO_COPY(x, **kwargs)
    if settings.numerics and out.dtype is torch.float16:
        round_to_dl16_(out)
    return out


_ATEN_RESIZE = torch.ops.aten.resize_.default


def _host_resize_(
    x: torch.Tensor, size: Sequence[int], memory_format: torch.memory_format | None = None
) -> torch.Tensor:
    """``resize_`` for a host whose storage NumPy has seen (DL16 rounding runs on a NumPy view,
    and PyTorch then marks the storage as not resizable): a new host holding what ``resize_``
    would keep, the leading elements of the storage from the tensor's offset. The caller makes
    the device tensor adopt it (see :func:`_store_one`)."""
    storage = x.untyped_storage()
    if storage.resizable():
        return _ATEN_RESIZE(x, size, memory_format=memory_format)  # type: ignore[no-any-return]
    fresh = torch.empty(size, dtype=x.dtype, memory_format=memory_format or torch.contiguous_format)
    available = storage.nbytes() // x.element_size() - x.storage_offset()
    kept = min(fresh.numel(), available)
    if kept > 0:
        flat = x.new_empty(0).set_(storage, x.storage_offset(), (available,), (1,))
        fresh.view(-1)[:kept].copy_(flat[:kept])
    return fresh


_HOST_KERNELS: dict[str, Callable[..., Any]] = {
    "aten.pow.Tensor_Scalar": _host_pow_scalar,
    "aten._to_copy.default": _host_to_copy,
    "aten.resize_.default": _host_resize_,
}
# host kernels whose fp16 results are already DL16 (stored by the kernel, or values kept)
_ROUNDS_ITSELF = frozenset({"aten._to_copy.default", "aten.resize_.default"})


class _Verdict:
    """The cached outcome of deciding one op call."""

    __slots__ = ("by_op_rule", "decision", "decompose", "error", "gap", "miscompiles", "value")

    def __init__(
        self,
        decision: Decision,
        gap: str | None,
        error: tuple[str, str, type[SpyreLoweringError]] | None = None,
        miscompiles: tuple[miscompile.Miscompile, ...] = (),
    ) -> None:
        self.decision = decision
        self.value = decision.value
        self.gap = gap
        self.error = error  # (gap, reason, class)
        self.miscompiles = miscompiles
        self.decompose = False  # run the op's CompositeImplicit decomposition instead
        self.by_op_rule = False  # the error is the op's own rule (not a layout/capability rule)


# --- the hot path ---------------------------------------------------------------------------


_MISMATCH = (
    "Expected all tensors to be on the same device, but found at least two devices, "
    "spyre:0 and cpu!"
)
_CPU_INDEX_OK = frozenset(
    {"aten.index", "aten.index_put_", "aten.index_put", "aten._index_put_impl_"}
)


def _unwrap_list(items: Any, info: _OpInfo, sig: list[Any] | None) -> Any:
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


def _unwrap(args: Sequence[Any], info: _OpInfo, sig: list[Any] | None) -> list[Any]:
    out: list[Any] = []
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
            out.append(x)
    return out


def _dispatch(func: OpOverload, args: Sequence[Any], kwargs: dict[str, Any] | None) -> Any:
    info = _INFO.get(func)
    if info is None:
        info = _INFO[func] = _OpInfo(func)
    if info.kind:
        return _special(func, info, args, kwargs or {})
    return _run(func, info, args, kwargs)


def _run(
    func: OpOverload, info: _OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> Any:
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
            verdict = info.cache[key] = _decide(info, hargs, hkwargs)
    else:
        hargs = _unwrap(args, info, None)
        hkwargs = _unwrap_kwargs(kwargs, info, None)
        if verdict is None:
            verdict = _first_decision(info, gen, args, kwargs, hargs, hkwargs)

    if verdict.error is not None:
        gap, reason, cls = verdict.error
        sig2 = [(h.dtype, tuple(h.shape)) for h in _host_tensors(hargs)]
        raise _make_error(current_stack(), info.name, gap, reason, sig2, cls,
                          op_rule=verdict.decision is Decision.UNSUPPORTED and verdict.by_op_rule)  # fmt: skip

    if verdict.decompose:
        # a composite op that reached the device whole (e.g. under inference_mode): its
        # decomposition dispatches the ops the catalogue knows
        return func.decompose(*args, **(kwargs or {}))
    telemetry.count_op(info.name, verdict.value)
    if kwargs and info.out_args:  # out=: return the given tensor, as PyTorch does
        for index, name in info.out_args:
            _out_kwargs[index] = kwargs.get(name)
        try:
            return _execute(func, info, verdict, args, kwargs, hargs, hkwargs)
        finally:
            _out_kwargs.clear()
    return _execute(func, info, verdict, args, kwargs, hargs, hkwargs)


def _run_harness(
    func: OpOverload, info: _OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> Any:
    """An op of the harness: the host kernel, stored the way the device stores results, no
    verdict (see :mod:`spyre_sim.scope`)."""
    hargs = _unwrap(args, info, None)
    hkwargs = _unwrap_kwargs(kwargs, info, None)
    telemetry.count_op(info.name, HARNESS)
    if kwargs and info.out_args:
        for index, name in info.out_args:
            _out_kwargs[index] = kwargs.get(name)
        try:
            return _finish(info, args, info.call(*hargs, **hkwargs))
        finally:
            _out_kwargs.clear()
    return _finish(info, args, info.call(*hargs, **hkwargs))


#: The decision value telemetry records for an op of the harness.
HARNESS = "harness"


def _execute(
    func: OpOverload,
    info: _OpInfo,
    verdict: _Verdict,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None,
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> Any:
    if verdict.decision is Decision.FALLBACK:
        return _fallback(func, info, verdict, args, hargs, hkwargs)
    out = info.call(*hargs, **hkwargs)  # the C++ op, without OpOverload.__call__
    if not verdict.miscompiles:
        return _finish(info, args, out)
    out, neg_source = _miscompile(verdict, args, kwargs or {}, out)
    result = _finish(info, args, out)
    if neg_source is not None:
        setattr(result, miscompile.NEG_SOURCE_ATTR, neg_source)
    return result


def _unwrap_kwargs(
    kwargs: dict[str, Any] | None, info: _OpInfo, sig: list[Any] | None
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
    info: _OpInfo,
    gen: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None,
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> _Verdict:
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
        verdict = info.cache[key] = _decide(info, hargs, hkwargs)
        return verdict
    info.shape_gen = None
    verdict = _decide(info, hargs, hkwargs)
    info.verdict, info.verdict_gen = verdict, gen
    return verdict


def _decide(info: _OpInfo, hargs: Sequence[Any], hkwargs: dict[str, Any]) -> _Verdict:
    release = current_stack()
    rule = release.op_rule(info.packet, info.overload)
    decision = rule.decision
    if decision is Decision.UNSUPPORTED and info.packet in _BOOKKEEPING:
        return _Verdict(Decision.NATIVE, None)
    if decision is Decision.UNSUPPORTED and rule.gap == "unlowered-op" and _composite(info):
        verdict = _Verdict(Decision.DECOMPOSED, None)
        verdict.decompose = True
        return verdict
    if decision is Decision.UNSUPPORTED:
        gap = rule.gap or "unlowered-op"
        reason = "the release has no kernel, decomposition or fallback for it"
        if rule.note:
            reason += f" ({rule.note})"
        verdict = _Verdict(decision, gap, (gap, reason, SpyreLoweringError))
        verdict.by_op_rule = True
        return verdict
    if decision is Decision.FALLBACK:
        return _Verdict(decision, rule.gap)
    for r in layout.active_rules(release, info.packet, settings.layout_checks):
        broken = r.check(info.packet, hargs, hkwargs)
        if broken is not None:
            text = f"{broken} (real stack: '{r.text}')" if r.text else broken
            cls = SpyreLayoutError if r.layout else SpyreLoweringError
            return _Verdict(Decision.UNSUPPORTED, r.gap, (r.gap, text, cls))
    found = []
    for m in miscompile.miscompiles_for(info.packet):
        state = release.gap_state(m.gap)  # an unknown gap id is a bug: it raises
        if state is GapState.MISCOMPILED or (
            decision is Decision.MISCOMPILED and rule.gap == m.gap
        ):
            found.append(m)
    if decision is Decision.MISCOMPILED and not found:
        found.append(miscompile.Miscompile(rule.gap or "unlowered-op", info.packet, _generic))
    if info.packet == "aten.neg" and _gap_state_is(release, "rotate-half", GapState.MISCOMPILED):
        found.append(miscompile.Miscompile("rotate-half", info.packet, _tag_neg))
    return _Verdict(decision, rule.gap, None, tuple(found))


# Ops that only change tensor metadata, never compiled by the stack; a catalogue that does not
# list them must not make them fail (they reach the device under inference_mode).
_BOOKKEEPING = frozenset({"aten.detach_", "aten.detach", "aten.alias", "aten._reshape_alias"})


def _composite(info: _OpInfo) -> bool:
    return bool(
        torch._C._dispatch_has_kernel_for_dispatch_key(info.qualname, "CompositeImplicitAutograd")
    )


def _gap_state_is(release: Release, gap: str, state: GapState) -> bool:
    return release.gap_state(gap) is state


def _generic(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    return miscompile.generic_corruption(out)


def _tag_neg(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Not a corruption: marks ``neg`` of a view so that ``cat`` can see the rotate_half
    pattern (see :mod:`spyre_sim.miscompile`)."""
    return None


def _miscompile(
    verdict: _Verdict, args: Sequence[Any], kwargs: dict[str, Any], out: Any
) -> tuple[Any, torch.Tensor | None]:
    """Apply the verdict's reproductions; returns (result, host tensor negated by neg)."""
    neg_source = None
    for m in verdict.miscompiles:
        if m.apply is _tag_neg:
            src = args[0]
            if type(src) is SpyreTensor:
                h = src._host
                if h.untyped_storage().nbytes() > h.numel() * h.element_size():
                    neg_source = h  # part of a larger tensor: a slice
            continue
        wrong = m.apply(args, kwargs, out)
        if wrong is not None:
            path = _modules.current_module_path()
            telemetry.count_miscompile(m.gap, path)
            telemetry.count_gap(m.gap, path)
            return wrong, None
    return out, neg_source


def _finish(info: _OpInfo, args: Sequence[Any], out: Any) -> Any:
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
            elif dtype in _STORE_AS:
                out = to_device_storage(out, fresh=True)
        return _wrap(out)
    if how >= 0:  # an input written in place (add_, copy_, out=): round where it is stored
        if settings.numerics and rounds and out.dtype is torch.float16:
            round_to_dl16_(out)
        target = args[how] if how < len(args) else _out_kwargs.get(how)
        if type(target) is SpyreTensor:
            # the host op wrote target's host (or, for resize_, replaced it: _host_resize_)
            if (
                target._host is not out
                or target.shape != out.shape
                or target.stride() != out.stride()
            ):
                _adopt_metadata(target, out)
            return target  # in-place ops and out= return the tensor they wrote
        return _wrap(out)
    return _wrap(out)  # a view: never rounded


def _adopt_metadata(target: SpyreTensor, host: torch.Tensor) -> None:
    """Give ``target`` the sizes and strides of its host tensor, which the op resized in place.

    Factories such as ``arange(n, device="spyre")`` create an empty tensor and fill it with
    an ``out=`` op that resizes it (``resize_`` itself lands here too); the caller keeps the
    tensor it passed, so that very object must change shape. Assigning ``.data`` copies the
    metadata of a fresh wrapper into it (the Python object, and so ``_host``, stays)."""
    target.data = _wrap(host)
    target._host = host


# out= tensors of the op being finished, by schema argument index (set by _run)
_out_kwargs: dict[int, Any] = {}


def _fallback(
    func: OpOverload,
    info: _OpInfo,
    verdict: _Verdict,
    args: Sequence[Any],
    hargs: list[Any],
    hkwargs: dict[str, Any],
) -> Any:
    name = info.name
    if name not in _warned_fallbacks:
        _warned_fallbacks.add(name)
        warnings.warn(
            f"{name} is falling back to cpu", SpyreFallbackWarning, stacklevel=_user_stacklevel()
        )
    telemetry.count_fallback(name)
    if verdict.gap:
        telemetry.count_gap(verdict.gap, _modules.current_module_path())
    for h in _host_tensors(hargs):
        telemetry.count_transfer(False, _nbytes(h))
    out = func(*hargs, **hkwargs)
    for h in _host_tensors(out if isinstance(out, (list, tuple)) else [out]):
        telemetry.count_transfer(True, _nbytes(h))
    return _finish(info, args, out)


# --- transfers and other special ops -------------------------------------------------------


def _special(func: OpOverload, info: _OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    kind = info.kind
    if kind == "to_copy":
        x = args[0]
        device = kwargs.get("device")
        if device is not None and torch.device(device).type != "spyre":
            # device -> host transfer (maybe with a dtype change, done on the host)
            h = x._host
            telemetry.count_transfer(False, _nbytes(h))
            hk = {k: v for k, v in kwargs.items() if k != "device"}
            reads_as = getattr(x, READS_AS, None)
            if reads_as is not None and hk.get("dtype") in (None, x.dtype):  # .cpu() names x.dtype
                hk["dtype"] = reads_as
            return func(h, **hk)
        if type(x) is not SpyreTensor:  # host tensor with device=spyre: a transfer
            return host_to_device(x if "dtype" not in kwargs else x.to(kwargs["dtype"]))
        dtype = kwargs.get("dtype")
        out = _run(func, info, args, kwargs)
        if dtype in _FLOAT_WIDE and type(out) is SpyreTensor and out.dtype is not dtype:
            setattr(out, READS_AS, dtype)  # stored as DL16, read back as the dtype cast to
        return out
    if kind == "copy":
        dst, src = args[0], args[1]
        dst_dev, src_dev = type(dst) is SpyreTensor, type(src) is SpyreTensor
        if dst_dev and src_dev:
            return _run(func, info, args, kwargs)
        if dst_dev:  # host -> device
            _check_transfer(src)
            telemetry.count_transfer(True, _nbytes(src))
            host = dst._host
            host.copy_(src)
            if settings.numerics and host.dtype is torch.float16:
                round_to_dl16_(host)
            return dst
        # device -> host
        telemetry.count_transfer(False, _nbytes(src._host))
        dst.copy_(src._host)
        return dst
    if kind == "copy_from":
        src, dst = args[0], args[1]
        return _copy_from(src, dst, resize=info.packet.endswith("resize"))
    if kind == "lift":
        x = args[0]
        if type(x) is SpyreTensor:
            return _run(func, info, args, kwargs)
        return host_to_device(x)
    if kind == "scalar":
        out = _run(func, info, args, kwargs)
        telemetry.count_transfer(False, args[0]._host.element_size())
        return out
    return _run(func, info, args, kwargs)


def _copy_from(src: Any, dst: Any, resize: bool) -> Any:
    if type(dst) is SpyreTensor:
        if type(src) is SpyreTensor:
            h = src._host
        else:
            _check_transfer(src)
            telemetry.count_transfer(True, _nbytes(src))
            h = src
        if resize:
            dst._host.resize_(h.shape)
        dst._host.copy_(h)
        if settings.numerics and dst._host.dtype is torch.float16:
            round_to_dl16_(dst._host)
        return dst
    h = src._host
    telemetry.count_transfer(False, _nbytes(h))
    if resize:
        dst.resize_(h.shape)
    dst.copy_(h)
    return dst


def inference_only_error(call: str) -> InferenceOnlyError:
    """The error for a backward pass asked of spyre tensors (``call`` names the entry point)."""
    return InferenceOnlyError(
        f"{call} on a spyre tensor: the Spyre device is inference-only (no training, "
        "no backward); train on the CPU (model.cpu()) and move the trained model to "
        "'spyre' for inference, under torch.no_grad() or torch.inference_mode()"
    )
