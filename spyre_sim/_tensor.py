"""The ``spyre`` tensor: a wrapper subclass of ``torch.Tensor`` holding its values in a host tensor.

A :class:`SpyreTensor` is what every op on the device takes and returns: ``_host`` holds its
stored values (DL16 in fp16, int32 for int64: :mod:`spyre_sim._storage`), and every ATen op on
it arrives in ``__torch_dispatch__``, which hands it to :func:`spyre_sim._dispatch.dispatch`.
The device this tensor reports is ``device_state.device`` (``spyre:0`` once registered).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from spyre_sim import limits, telemetry
from spyre_sim.errors import InferenceOnlyError
from spyre_sim.state import device_state

_META = torch.device("meta")  # what a tensor made before registration reports


class SpyreTensor(torch.Tensor):
    """A tensor on the emulated ``spyre`` device; ``_host`` holds its values on the CPU."""

    _host: torch.Tensor
    #: DL16 values fp16 does not hold, kept in float32 beside ``_host`` (:mod:`_wide_values`)
    _wide: _wide_values.Wide | None = None

    @staticmethod
    def __new__(cls, data: torch.Tensor, requires_grad: bool = False, **attrs: Any) -> SpyreTensor:
        """``SpyreTensor(t)``: ``t`` on the device (a device tensor is shared, a host tensor is
        moved). ``requires_grad`` and attributes are accepted the way ``nn.Parameter`` and
        accelerate rebuild a parameter of the same class (``type(p)(new_value,
        requires_grad=..., **p.__dict__)``); the device holds no gradients."""
        if type(data) is SpyreTensor:
            t = wrap(data._host)
            _wide_values.share_wide(data, t)
        else:
            t = _storage.host_to_device(data)
        for name, value in attrs.items():
            if name not in ("_host", "_wide"):
                setattr(t, name, value)
        return t

    def __deepcopy__(self, memo: dict[int, Any]) -> SpyreTensor:
        """A copy with its own host storage, on the device (a copy of the stored values, not a
        computation: no verdict)."""
        found = memo.get(id(self))
        if isinstance(found, SpyreTensor):
            return found
        copy = wrap(self._host.clone())
        for name, value in self.__dict__.items():
            if name not in ("_host", "_wide"):
                setattr(copy, name, value)
        _wide_values.copy_wide(self, copy)
        limits.note_new(copy)
        memo[id(self)] = copy
        return copy

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @property
    def data(self) -> torch.Tensor:
        return torch._C.TensorBase.data.__get__(self)  # type: ignore[attr-defined,no-any-return]

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        """``t.data = other``: ``t`` takes ``other``'s shape, dtype and values (its host storage,
        shared, as a host tensor's storage is). PyTorch's own setter changes only the wrapper's
        metadata: without this, ``resize_token_embeddings`` of a model on the device kept the
        old rows under the new shape."""
        torch._C.TensorBase.data.__set__(self, value)  # type: ignore[attr-defined]
        self._host = value._host if type(value) is SpyreTensor else value
        _wide_values.share_wide(value, self)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        text = repr(self._host)
        if text.endswith(")"):
            text = text[:-1] + ", device='spyre:0')"
        return text

    def to(self, *args: Any, **kwargs: Any) -> Any:
        out = super().to(*args, **kwargs)
        if out is self and _asks_16_bit(args, kwargs):
            return _miscompiles_fp32.downcast(self)
        return out

    def half(self, *args: Any, **kwargs: Any) -> Any:
        out = super().half(*args, **kwargs)
        return _miscompiles_fp32.downcast(self) if out is self else out

    def bfloat16(self, *args: Any, **kwargs: Any) -> Any:
        out = super().bfloat16(*args, **kwargs)
        return _miscompiles_fp32.downcast(self) if out is self else out

    def tolist(self) -> Any:
        telemetry.count_transfer(False, nbytes(self._host))
        _wide_values.read(self)
        return self._host.tolist()

    def __format__(self, format_spec: str) -> str:
        # torch formats a 0-dim tensor through .item() only for exact torch.Tensor
        if self.dim() == 0:
            telemetry.count_transfer(False, nbytes(self._host))
            _wide_values.read(self)
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
        return wrap(inner["_host"])

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls,
        func: OpOverload,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return _dispatch.dispatch(func, args, kwargs)


def wrap(host: torch.Tensor) -> SpyreTensor:
    t: SpyreTensor = torch.Tensor._make_wrapper_subclass(
        SpyreTensor,
        host.shape,
        strides=host.stride(),
        storage_offset=host.storage_offset(),
        dtype=host.dtype,
        device=device_state.device or _META,
        requires_grad=False,
    )
    t._host = host
    return t


def nbytes(t: torch.Tensor) -> int:
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


def inference_only_error(call: str) -> InferenceOnlyError:
    """The error for a backward pass asked of spyre tensors (``call`` names the entry point)."""
    return InferenceOnlyError(
        f"{call} on a spyre tensor: the Spyre device is inference-only (no training, "
        "no backward); train on the CPU (model.cpu()) and move the trained model to "
        "'spyre' for inference, under torch.no_grad() or torch.inference_mode()"
    )


# The modules of the op path use this one by name; imported last so that any of them can be
# imported first (each refers to the others through their module objects).
from spyre_sim import _storage, _dispatch, _wide_values  # noqa: E402, I001
from spyre_sim import _miscompiles_fp32  # noqa: E402


def _asks_16_bit(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a ``Tensor.to`` call names a 16-bit float dtype (directly, or as the dtype of a
    tensor it is handed)."""
    for value in (*args, kwargs.get("dtype"), kwargs.get("other")):
        dtype = value.dtype if isinstance(value, torch.Tensor) else value
        if dtype in (torch.float16, torch.bfloat16):
            return True
    return False
