"""Registration of the ``spyre`` device: a pure-Python PrivateUse1 backend.

:func:`register` (called by ``import spyre_sim``; idempotent):

- renames PrivateUse1 to ``spyre`` and installs PyTorch's Python-backend hooks and device guard
  (``torch.utils.backend_registration._setup_privateuseone_for_python_backend``) with
  :mod:`spyre_sim.backend` as ``torch.spyre``;
- registers PrivateUse1 kernels for the ops every factory and transfer ends in
  (``empty.memory_format``, ``empty_strided``, ``_copy_from``, ``_copy_from_and_resize``;
  ``_local_scalar_dense``, which ``torch.tensor`` of device scalars reaches below the Python key),
  a fallthrough for ``AutocastPrivateUse1``, and an ``AutogradPrivateUse1`` kernel for
  ``scaled_dot_product_attention`` so that the device sees SDPA whole (to judge gaps ``sdpa``
  and ``sdpa-gqa``) instead of its decomposition;
- installs the module-path hooks of :mod:`spyre_sim._modules` and the index-dtype checks of
  :mod:`spyre_sim._index_dtype` (gap ``int64-storage``);
- routes ``torch.accelerator``'s memory functions and ``synchronize`` to :mod:`spyre_sim.backend`
  while ``spyre`` is the current accelerator. PyTorch answers them from the backend's C++
  ``DeviceAllocator``, which a Python backend cannot register: left alone they fail with an
  internal assert ("Allocator for spyre is not a DeviceAllocator"), and so does every library
  that calls them generically: accelerate 1.16 empties the cache at each offloaded weight it
  brings in, also for a model on the CPU once ``spyre`` is registered. torch-spyre serves these
  calls through ``torch.accelerator`` (torch-spyre #1182, #1271, #770); ``get_memory_info`` is
  not served by the real stack either (#4542) and is left as PyTorch has it.

The ``torch.library.Library`` objects are kept referenced here: a collected one silently
unregisters its kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from spyre_sim import (
    _dispatch,
    _index_dtype,
    _modules,
    _special_ops,
    _storage,
    _tensor,
    backend,
)
from spyre_sim.state import device_state

__all__ = ["register"]

_libraries: list[Any] = []
_Library: Any = torch.library.Library  # untyped in torch's stubs


def _empty_memory_format(
    size: Any,
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    dtype = _storage.storage_dtype(dtype or torch.get_default_dtype())
    host = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
    return _tensor.wrap(host)


def _empty_strided(
    size: Any,
    stride: Any,
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    dtype = _storage.storage_dtype(dtype or torch.get_default_dtype())
    return _tensor.wrap(torch.empty_strided(size, stride, dtype=dtype))


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    return _special_ops.copy_from(src, dst, resize=False)  # type: ignore[no-any-return]


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    return _special_ops.copy_from(src, dst, resize=True)  # type: ignore[no-any-return]


def _local_scalar_dense(t: torch.Tensor) -> Any:
    # ``torch.tensor([...])`` of device scalars reads each with ``item()`` below the Python key,
    # so the op reaches this kernel instead of SpyreTensor.__torch_dispatch__: give it the same
    # verdict (gap ``host-sync``) and the same host read as an ``item()`` on the tensor.
    return _dispatch.dispatch(torch.ops.aten._local_scalar_dense.default, (t,), {})


def _sdpa_whole(*args: Any, **kwargs: Any) -> Any:
    # Below autograd, the Python key hands the op itself to SpyreTensor.__torch_dispatch__.
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.aten.scaled_dot_product_attention.default(*args, **kwargs)


def register() -> None:
    """Register the ``spyre`` device with PyTorch (idempotent)."""
    if _libraries:
        return
    if torch._C._get_privateuse1_backend_name() not in ("privateuseone", "spyre"):
        raise RuntimeError(
            "PrivateUse1 is already registered as "
            f"{torch._C._get_privateuse1_backend_name()!r}; spyre_sim needs it for 'spyre'"
        )
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    if getattr(torch, "spyre", None) is None:
        _setup_privateuseone_for_python_backend("spyre", backend_module=backend)
    device_state.device = torch.device("spyre", 0)
    aten = _Library("aten", "IMPL")
    aten.impl("empty.memory_format", _empty_memory_format, "PrivateUse1")
    aten.impl("empty_strided", _empty_strided, "PrivateUse1")
    aten.impl("_copy_from", _copy_from, "PrivateUse1")
    aten.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    aten.impl("_local_scalar_dense", _local_scalar_dense, "PrivateUse1")
    aten.impl("scaled_dot_product_attention", _sdpa_whole, "AutogradPrivateUse1")
    autocast = _Library("_", "IMPL")
    autocast.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    _libraries.extend([aten, autocast])
    _modules.install()
    _index_dtype.install()
    _refuse_autograd_on_device()
    _route_accelerator_api()


#: ``torch.accelerator`` functions PyTorch answers itself for a Python backend; the others that
#: :mod:`spyre_sim.backend` defines (memory, ``synchronize``) are routed to it.
_ANSWERED_BY_PYTORCH = frozenset({"device_count", "is_available"})


def _routed(original: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        device = torch.accelerator.current_accelerator()
        if device is not None and device.type == "spyre":
            return ours(*args, **kwargs)
        return original(*args, **kwargs)

    call._spyre_routed = True  # type: ignore[attr-defined]
    return call


def _route_accelerator_api() -> None:
    """See the module docstring (idempotent)."""
    namespaces = [torch.accelerator, getattr(torch.accelerator, "memory", None)]
    for name in sorted(set(backend.__all__) - _ANSWERED_BY_PYTORCH):
        for namespace in namespaces:
            original = getattr(namespace, name, None)
            if original is None or getattr(original, "_spyre_routed", False):
                continue
            setattr(namespace, name, _routed(original, getattr(backend, name)))


def _refuse_autograd_on_device() -> None:
    """Make ``torch.autograd.backward`` / ``grad`` refuse spyre outputs up front.

    The device is inference-only. Left alone, autograd's engine runs the backward of spyre
    tensors on a C++ device thread, where an error raised by the emulated stack (an op the
    release cannot lower) aborts the whole process instead of raising. ``Tensor.backward`` is
    refused by :class:`~spyre_sim._tensor.SpyreTensor` itself; these two wrappers cover the
    functional entry points. Tensors of other devices pass through untouched.
    """
    backward, grad = torch.autograd.backward, torch.autograd.grad
    if getattr(grad, "_spyre_guard", False):
        return

    def _on_device(outputs: Any) -> bool:
        items = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
        return any(isinstance(t, _tensor.SpyreTensor) for t in items)

    def guarded_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if _on_device(tensors):
            raise _tensor.inference_only_error("torch.autograd.backward()")
        return backward(tensors, *args, **kwargs)

    def guarded_grad(outputs: Any, *args: Any, **kwargs: Any) -> Any:
        if _on_device(outputs):
            raise _tensor.inference_only_error("torch.autograd.grad()")
        return grad(outputs, *args, **kwargs)

    pairs: tuple[tuple[Any, Any], ...] = ((guarded_backward, backward), (guarded_grad, grad))
    for wrapper, wrapped in pairs:
        wrapper.__doc__ = wrapped.__doc__
        wrapper.__wrapped__ = wrapped
        wrapper._spyre_guard = True
    torch.autograd.backward = guarded_backward
    torch.autograd.grad = guarded_grad
