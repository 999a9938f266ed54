"""DL16 numbers the fp16 host tensors cannot hold, kept in float32 beside them.

The emulator holds the device's DL16 values in fp16 host tensors (:mod:`spyre_sim.numerics`),
which reach 65504; DL16 reaches about 8.6e9. CPMAnt's RMS norm squares hidden values of 9e3 in
float32: 8.8e7 on the device. The host tensor holds such a number as +-65472, as before, and
the result now also carries its DL16 values in float32, a *wide value* (:class:`Wide`), made
where an op's result is rounded (:func:`spyre_sim.numerics.round_wide_kept`). At the other end,
DL16's normals reach down to 2**-30 where fp16 has only subnormals below 6.1e-5 (none below
6e-8): CHMv2 shifts its logits by 1e-8. Where the device's ``eps-underflow`` reproduction finds
such a number lost (:mod:`spyre_sim._miscompiles_ops`: the op is right on the device), the op is
computed again in wide mode and its result carries them.

Every later op with an operand that carries one runs in *wide mode* (:func:`call`): on the
float32 values of those operands and exact float32 copies of the others, a ``float16`` dtype
argument read as float32, each floating result rounded once to DL16 with DL16's range (no
subnormals). A result that again holds a number fp16 does not carries it on; one fp16 holds is
an ordinary fp16 host tensor again (``rsqrt(8.8e7)``). Comparisons and integer results are
those of the wide values. A view shares its base's wide values (one :class:`_Store`); an op
written in place into a tensor that carries them writes them too.

Where the emulator still cannot follow the device, it counts the emulator limit
(:func:`limit_of`: ``fp16-range`` beyond 65472, ``fp16-holder`` below fp16's normals), as it did
before at every such result:

- a read to the host in float16, the dtype the tensor declares (``.cpu()``, ``.item()``,
  ``.tolist()``, a transfer inside the model): what the device's conversion gives for a number
  fp16 cannot hold is not documented. A harness's ``out.float().cpu()`` reads the float32
  values, which hold it;
- a host fallback (the device hands the host fp16), a random draw, an ``out=`` op, and an op
  whose wide form the host refuses: they run on the held values;
- an op whose miscompile reproduction changes its result (in place too): the reproduction's
  held values replace the wide ones;
- an op written in place into a tensor that carries no wide value, whose result fp16 cannot
  hold (its other views could not see a wide value attached now).

A result that carries a value already held at the limit (a ``-inf`` mask, ``finfo(float16).min``)
keeps the held value, as before (:func:`spyre_sim._wide_arithmetic.call`). Nothing changes for
a tensor that never held such a number: no op runs in wide mode before the first wide value of
the process (:attr:`~spyre_sim.state.DeviceState.wide_seen`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from spyre_sim import _host_arguments, _modules, _op_results, _wide_arithmetic, limits
from spyre_sim._miscompiles_ops import EMULATOR_LIMIT as HOLDER_LIMIT
from spyre_sim._tensor import SpyreTensor
from spyre_sim.numerics import (
    beyond_host,
    round_to_dl16_,
    round_wide_in_range,
    round_wide_kept,
    tiny_unheld,
)
from spyre_sim.state import device_state

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

__all__ = [
    "Wide",
    "attach",
    "attach_results",
    "call",
    "carried",
    "copy_wide",
    "drop",
    "limit_of",
    "lost",
    "note",
    "read",
    "share_wide",
    "stored_into",
    "values_of",
]

_HOST = torch.device("cpu")

#: Ops that hand a value to the host: they read the held values (and count the loss).
_READS = frozenset({"aten._local_scalar_dense"})

#: Ops that change what a tensor's storage is, not its values (``unsqueeze_``, ``t_`` and the
#: other in-place views are recognised by their tag): they run on the held values, and a
#: tensor they write drops its wide values.
_STORAGE_OPS = frozenset({"aten.set_", "aten.resize_", "aten.resize_as_"})

#: Special ops (:mod:`spyre_sim._special_ops`) that are ordinary ops between device tensors
#: when they get here: a cast on the device, a copy between device tensors.
_SPECIAL_OPS_RUN = frozenset({"aten._to_copy", "aten.copy_"})


class _Store:
    """The wide values of one storage, shared by a tensor and its views."""

    __slots__ = ("valid",)

    def __init__(self) -> None:
        self.valid = True


class Wide:
    """A device tensor's DL16 values in float32 (``values``, a view of its store's tensor)."""

    __slots__ = ("store", "values")

    def __init__(self, values: torch.Tensor, store: _Store) -> None:
        self.values = values
        self.store = store


def attach(t: Any, values: torch.Tensor, store: _Store | None = None) -> None:
    """Give device tensor ``t`` the float32 DL16 values ``values`` (of its shape), in ``store``
    (a new one unless it is a view of a tensor that has one)."""
    t._wide = Wide(values, store if store is not None else _Store())
    device_state.wide_seen = True


def values_of(t: Any) -> torch.Tensor | None:
    """The wide values of device tensor ``t``, or ``None`` when it carries none."""
    wide: Wide | None = t._wide
    if wide is None or not wide.store.valid:
        return None
    return wide.values


def carried(args: Sequence[Any], kwargs: dict[str, Any] | None) -> bool:
    """Whether an operand (also inside a list, or a keyword argument) carries wide values."""
    for value in args:
        if type(value) is SpyreTensor:
            if value._wide is not None and value._wide.store.valid:
                return True
        elif isinstance(value, (list, tuple)) and carried(value, None):
            return True
    return bool(kwargs) and carried(list(kwargs.values()), None)  # type: ignore[union-attr]


def limit_of(values: torch.Tensor) -> str | None:
    """The emulator limit an fp16 host tensor meets holding the wide values ``values``:
    ``fp16-range`` for a number beyond 65472, ``fp16-holder`` for a nonzero one below fp16's
    normals that its subnormals do not hold exactly, else ``None``."""
    if beyond_host(values):
        return _wide_arithmetic.RANGE_LIMIT
    if tiny_unheld(values):
        return HOLDER_LIMIT
    return None


def note(limit: str) -> None:
    """Count one emulator limit ``limit`` in the running module."""
    limits.met(limit, _modules.current_module_path())


def lost(info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any] | None) -> None:
    """The op runs on the held values: count the emulator limit once when an operand's wide
    values hold a number fp16 does not (:func:`limit_of`), and drop the wide values of every
    tensor it writes (they would no longer be its values)."""
    limit = None
    for value in [*args, *(kwargs or {}).values()]:
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if type(t) is SpyreTensor:
                wide = values_of(t)
                if wide is not None and limit is None:
                    limit = limit_of(wide)
    written = [args[i] for i in info.mutated if i < len(args)]
    written += [(kwargs or {}).get(name) for _, name in info.out_args]
    for t in written:
        drop(t)
    if limit is not None:
        note(limit)


def drop(t: Any) -> None:
    """Drop the wide values of device tensor ``t`` and its views (they are no longer its
    values: the held ones are)."""
    if type(t) is SpyreTensor and t._wide is not None:
        t._wide.store.valid = False


def read(t: Any, dtype: torch.dtype | None = None) -> torch.Tensor | None:
    """A read of device tensor ``t`` to the host: its wide values when they are read in a
    floating dtype wider than fp16 (``dtype``), else ``None`` (the held values are read, and
    the loss is counted when they held a number fp16 does not: :func:`limit_of`)."""
    wide = values_of(t)
    if wide is None:
        return None
    if dtype in (torch.float32, torch.float64):
        return wide
    limit = limit_of(wide)
    if limit is not None:
        note(limit)
    return None


def _widened(value: Any, dtype: torch.dtype) -> Any:
    """An operand of wide mode: a device tensor's wide values or its fp16 host values widened
    exactly, ``float16`` read as the wide dtype; lists element by element."""
    if type(value) is SpyreTensor:
        wide = values_of(value)
        host = value._host if wide is None else wide
        if host.dtype is torch.float16 or (wide is not None and host.dtype is not dtype):
            return host.to(dtype)
        return host
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v, dtype) for v in value)
    if value is torch.float16:
        return dtype
    if isinstance(value, torch.device) and value.type == "spyre":
        return _HOST
    return value


def call(func: Any, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The op in wide mode (see the module docstring), its results stored and wrapped; or
    ``NotImplemented`` when it runs on the held values (the loss counted)."""
    if (
        info.out_args
        or info.packet in _READS
        or (info.special is not None and info.packet not in _SPECIAL_OPS_RUN)
        or (torch.Tag.nondeterministic_seeded in func.tags and info.dropout is None)
        or (info.mutated and (len(info.mutated) != 1 or torch.Tag.inplace_view in func.tags))
        or info.packet in _STORAGE_OPS
    ):
        lost(info, args, kwargs)
        return NotImplemented
    dtype = info.wide if info.wide is torch.float64 else torch.float32
    written = info.mutated[0] if info.mutated else None
    target = args[written] if written is not None and written < len(args) else None
    if written is not None and type(target) is not SpyreTensor:
        lost(info, args, kwargs)
        return NotImplemented
    wargs = [_widened(a, dtype) for a in args]
    if info.wide_index:
        wargs = _host_arguments.widened(wargs, info.wide_index)
    wkwargs = {k: _widened(v, dtype) for k, v in kwargs.items()}
    own = values_of(target) if target is not None else None
    if target is not None and (own is None or own.dtype is not dtype):
        wargs[written] = _widened(target, dtype).clone()  # type: ignore[index]
    elif target is not None:
        wargs[written] = own  # type: ignore[index]
    try:
        out = info.call(*wargs, **wkwargs)
    except (RuntimeError, NotImplementedError, TypeError):
        lost(info, args, kwargs)
        return NotImplemented
    if target is not None:
        return _written(target, wargs[written], own)  # type: ignore[index]
    if info.is_view:
        return _view(info, args, kwargs, out)
    return _fresh(info, args, out)


def _written(target: SpyreTensor, result: torch.Tensor, own: torch.Tensor | None) -> SpyreTensor:
    """An in-place op computed on ``result`` (the target's wide values ``own`` themselves, or a
    wide copy of its held values): both rounded to DL16 where they are stored."""
    if result.dtype not in (torch.float32, torch.float64):  # bf16, integer, bool targets
        target._host.copy_(result)
        return target
    held, kept = round_wide_kept(result, tiny=True)
    if own is not None:
        own.copy_(kept if kept is not None else held)  # the values DL16 holds, in float32
    elif kept is not None:
        # the target cannot take wide values now: its other views would not see them
        note(limit_of(kept) or _wide_arithmetic.RANGE_LIMIT)
    target._host.copy_(held)
    return target


def _view(info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any], wide_view: Any) -> Any:
    """A view op: the view of the held values, sharing the viewed tensor's wide values (a view
    of another dtype or shape, ``view(torch.int16)``, drops them for every view)."""
    hargs = _host_arguments.unwrap(args, info, None)
    hkwargs = _host_arguments.unwrap_kwargs(kwargs, info, None)
    result = _op_results.finish(info, args, info.call(*hargs, **hkwargs))
    base = next(a for a in args if type(a) is SpyreTensor and values_of(a) is not None)
    assert base._wide is not None
    store = base._wide.store
    views = result if isinstance(result, (list, tuple)) else (result,)
    wides = wide_view if isinstance(wide_view, (list, tuple)) else (wide_view,)
    for view, wide in zip(views, wides, strict=True):
        if type(view) is not SpyreTensor:
            continue
        if (
            isinstance(wide, torch.Tensor)
            and wide.dtype is torch.float32
            and wide.shape == view.shape
        ):
            attach(view, wide, store)
        elif store.valid:
            lost(info, args, kwargs)
            store.valid = False
    return result


def _fresh(info: OpInfo, args: Sequence[Any], out: Any) -> Any:
    """Fresh results: floating ones rounded once to DL16, those beyond fp16's range carrying
    their wide values; others (comparisons, indices) as computed on the wide values."""
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    held: list[Any] = []
    kept: list[torch.Tensor | None] = []
    for value in outs:
        if isinstance(value, torch.Tensor) and value.dtype in (torch.float32, torch.float64):
            half, wide = round_wide_kept(value, tiny=True)  # may be an operand's wide values
            held.append(half)
            kept.append(wide)
        else:
            if isinstance(value, torch.Tensor) and value.dtype is torch.float16:
                round_to_dl16_(value)
            held.append(value)
            kept.append(None)
    stored = type(out)(held) if isinstance(out, (list, tuple)) else held[0]
    result = _op_results.finish(info, args, stored, rounded=True)
    attach_results(result, kept)
    return result


def attach_results(result: Any, kept: list[torch.Tensor | None]) -> None:
    """Give each wrapped result the wide values ``kept`` lists for it (``None``: none)."""
    results = result if isinstance(result, (list, tuple)) else (result,)
    for wrapper, wide in zip(results, kept, strict=True):
        if wide is not None and type(wrapper) is SpyreTensor:
            attach(wrapper, wide)


def copy_wide(source: Any, target: Any) -> None:
    """``target`` (a new device tensor with ``source``'s values) takes a copy of ``source``'s
    wide values."""
    wide = values_of(source)
    if wide is not None:
        attach(target, wide.clone())


def share_wide(source: Any, target: Any) -> None:
    """``target`` (a device tensor on ``source``'s host storage) shares its wide values."""
    target._wide = source._wide if type(source) is SpyreTensor else None


def stored_into(target: Any, values: torch.Tensor) -> None:
    """A host tensor was copied into device tensor ``target``: its wide values take the same
    DL16 values (``values``: what was stored)."""
    wide = values_of(target)
    if wide is not None:
        wide.copy_(round_wide_in_range(values.expand(wide.shape)))
