"""An op's host results stored the way the device stores them, and wrapped.

A fresh fp16 result is rounded to DL16 in place (unless the op preserves values), fp32/int64
results are stored as fp16/int32; an input written in place (``add_``, ``copy_``, ``out=``) is
rounded where it is stored and returned itself, taking the host tensor's sizes and strides when
the op resized it; a view of an input is never rounded (rounding a view breaks aliasing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from spyre_sim import _storage
from spyre_sim._tensor import SpyreTensor, wrap
from spyre_sim.numerics import round_to_dl16_
from spyre_sim.settings import settings
from spyre_sim.state import device_state

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

_out_args = device_state.out_args  # out= tensors of the op being finished (set by dispatch)


def finish(info: OpInfo, args: Sequence[Any], out: Any, rounded: bool = False) -> Any:
    """Store results the way the device does and wrap them (``rounded``: fp16 results are
    DL16 already)."""
    rounds = info.rounds and not rounded
    if type(out) is torch.Tensor:
        return _store_one(info.output_how(0), args, out, rounds)
    if isinstance(out, (tuple, list)):
        return type(out)(
            _store_one(info.output_how(i), args, o, rounds) if isinstance(o, torch.Tensor) else o
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
    # a view: never rounded. Under inference_mode a view of a normal tensor is a normal tensor:
    # autograd's view kernel then gives it the base's version counter, which a wrapper made
    # as an inference tensor cannot take ("Cannot set version_counter for inference tensor")
    if torch.is_inference_mode_enabled() and _normal_base(args):
        with torch.inference_mode(False):
            return wrap(out)
    return wrap(out)


def _normal_base(args: Sequence[Any]) -> bool:
    """The viewed input (the op's first device tensor) is not an inference tensor."""
    for arg in args:
        if type(arg) is SpyreTensor:
            return not arg.is_inference()
    return False


def _adopt_metadata(target: SpyreTensor, host: torch.Tensor) -> None:
    """Give ``target`` the sizes and strides of its host tensor, which the op resized in place.

    Factories such as ``arange(n, device="spyre")`` create an empty tensor and fill it with
    an ``out=`` op that resizes it (``resize_`` itself lands here too); the caller keeps the
    tensor it passed, so that very object must change shape. Assigning ``.data`` copies the
    metadata of a fresh wrapper into it (the Python object, and so ``_host``, stays)."""
    target.data = wrap(host)
    target._host = host
