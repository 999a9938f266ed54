"""Special ops: the ATen ops whose meaning on the device is not an ordinary op.

Transfers (``_to_copy`` to or from another device, ``copy_`` across devices, ``_copy_from``,
``lift_fresh``) and scalar reads (``_local_scalar_dense``) move values between host and device:
they are counted as transfers and checked and stored by :mod:`spyre_sim._storage`. Each handler
is registered for its ATen packets by :func:`special_op`; the hot path
(:mod:`spyre_sim._dispatch`) looks the handler up once per overload
(:class:`~spyre_sim._op_info.OpInfo`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload

from spyre_sim import _dispatch, _storage, _wide_values, scope, telemetry
from spyre_sim._tensor import SpyreTensor, nbytes

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

#: ``handler(func, info, args, kwargs) -> result`` of a special op
Handler = Callable[[OpOverload, "OpInfo", Sequence[Any], dict[str, Any]], Any]

_HANDLERS: dict[str, Handler] = {}


def special_op(*packets: str) -> Callable[[Handler], Handler]:
    """Register ``handler`` for the ATen packets ``packets`` (``"aten._to_copy"``)."""

    def register(handler: Handler) -> Handler:
        for packet in packets:
            _HANDLERS[packet] = handler
        return handler

    return register


def handler(packet: str) -> Handler | None:
    """The handler registered for ``packet``, or ``None`` (an ordinary op)."""
    return _HANDLERS.get(packet)


@special_op("aten._to_copy")
def _to_copy(func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A cast, or a transfer when it names another device (the dtype change done on the host)."""
    x = args[0]
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "spyre":
        # device -> host transfer (maybe with a dtype change, done on the host)
        h = x._host
        telemetry.count_transfer(False, nbytes(h))
        hk = {k: v for k, v in kwargs.items() if k != "device"}
        # the harness's ``out.float().cpu()`` reads the dtype it cast to; inside the model
        # (a host fallback of an adapter, a model's own ``.cpu()``) a transfer gives what the
        # device holds, so operands that are all float32 in the model arrive with one dtype
        reads_as = getattr(x, _storage.READS_AS, None)
        if (
            reads_as is not None
            and hk.get("dtype") in (None, x.dtype)  # .cpu() names x.dtype
            and not scope.in_model_scope()
        ):
            hk["dtype"] = reads_as
        wide = _wide_values.read(x, hk.get("dtype"))
        return func(h if wide is None else wide, **hk)
    if type(x) is not SpyreTensor:  # host tensor with device=spyre: a transfer
        return _storage.host_to_device(x if "dtype" not in kwargs else x.to(kwargs["dtype"]))
    dtype = kwargs.get("dtype")
    out = _dispatch.run(func, info, args, kwargs)
    if dtype in _storage.FLOAT_WIDE and type(out) is SpyreTensor and out.dtype is not dtype:
        setattr(out, _storage.READS_AS, dtype)  # stored as DL16, read back as the dtype cast to
    return out


@special_op("aten.copy_")
def _copy(func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``dst.copy_(src)``: an op on the device, or a transfer when one side is on the host."""
    dst, src = args[0], args[1]
    dst_dev, src_dev = type(dst) is SpyreTensor, type(src) is SpyreTensor
    if dst_dev and src_dev:
        return _dispatch.run(func, info, args, kwargs)
    if dst_dev:  # host -> device
        _storage.check_transfer(src)
        telemetry.count_transfer(True, nbytes(src))
        host = dst._host
        _storage.store_into(host, src)
        _storage.entered(host)
        _wide_values.stored_into(dst, host)
        return dst
    # device -> host
    telemetry.count_transfer(False, nbytes(src._host))
    wide = _wide_values.read(src, dst.dtype)
    dst.copy_(src._host if wide is None else wide)
    return dst


@special_op("aten._copy_from", "aten._copy_from_and_resize")
def _copy_from_op(
    func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    return copy_from(args[0], args[1], resize=info.packet.endswith("resize"))


@special_op("aten.lift_fresh", "aten.lift_fresh_copy")
def _lift(func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A tensor constant entering the program: a transfer when it is a host tensor."""
    x = args[0]
    if type(x) is SpyreTensor:
        return _dispatch.run(func, info, args, kwargs)
    return _storage.host_to_device(x)


@special_op("aten._local_scalar_dense")
def _scalar(func: OpOverload, info: OpInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``.item()``: an op, and one element moved to the host (a wide value's loss is counted
    by the op: :mod:`spyre_sim._wide_values`)."""
    out = _dispatch.run(func, info, args, kwargs)
    telemetry.count_transfer(False, args[0]._host.element_size())
    return out


def copy_from(src: Any, dst: Any, resize: bool) -> Any:
    """``_copy_from(src, dst)`` between the host and the device (either way), or within it."""
    if type(dst) is SpyreTensor:
        if type(src) is SpyreTensor:
            h = src._host
        else:
            _storage.check_transfer(src)
            telemetry.count_transfer(True, nbytes(src))
            h = src
        if resize:
            dst._host.resize_(h.shape)
            dst._wide = None  # a new storage
        _storage.store_into(dst._host, h)
        if h is src:  # a host tensor entered the device
            _storage.entered(dst._host)
            _wide_values.stored_into(dst, dst._host)
        else:
            wide = _wide_values.values_of(src)
            if wide is not None and _wide_values.values_of(dst) is None:
                _wide_values.read(src)  # dst holds the held values
            _wide_values.stored_into(dst, dst._host if wide is None else wide)
        return dst
    h = src._host
    telemetry.count_transfer(False, nbytes(h))
    wide = _wide_values.read(src, dst.dtype)
    if wide is not None:
        h = wide
    if resize:
        dst.resize_(h.shape)
    dst.copy_(h)
    return dst
