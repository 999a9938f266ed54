"""The device is inference-only: a real backward pass is out of scope, and stopped early.

Only a backward is out of scope: a forward that computes a loss (``labels=...``) is inference
work like any other and is judged by the catalogue. While a ``--spyre`` run is active,
:class:`BackwardGuard` makes ``torch.autograd.backward`` / ``torch.autograd.grad`` (which
``Tensor.backward`` calls) and the device tensor's own ``backward`` check their outputs first
and raise :class:`InferenceOnlySkip` when any lives on the device; host tensors go through
untouched. That is a pytest skip outcome carrying the
:class:`~spyre_sim.InferenceOnlyError` message, not the error itself: pytest reports a skip
without rendering the traceback an error gets (through a model's frames about half a second
per test), and test code cannot swallow it with a bare ``except Exception``. It also keeps
autograd's engine from running a backward on device tensors at all (its C++ worker thread
cannot raise an emulated device's error cleanly).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from _pytest.outcomes import Skipped  # pytest.skip.Exception, as a class mypy can subclass

from spyre_sim import InferenceOnlyError

__all__ = ["BackwardGuard", "InferenceOnlySkip", "skip_reason"]


def skip_reason(error: BaseException) -> str:
    """The reason of an inference-only skip, from the error that stopped the test."""
    return (
        "spyre: inference-only device: this test runs backward/training on the device, which "
        f"Spyre does not support ({str(error).splitlines()[0]})"
    )


class InferenceOnlySkip(Skipped):
    """Raised by :class:`BackwardGuard` for backward on device tensors: the test is skipped.

    ``error`` is the :class:`~spyre_sim.InferenceOnlyError` a plain run would raise."""

    def __init__(self, error: InferenceOnlyError) -> None:
        super().__init__(skip_reason(error), _use_item_location=True)
        self.error = error


def _tensors(value: Any) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _refuse(kind: str, outputs: Any) -> None:
    on_device = [t for t in _tensors(outputs) if t.device.type == "spyre"]
    if on_device:
        shapes = ", ".join(f"{t.dtype}{list(t.shape)}" for t in on_device[:3])
        raise InferenceOnlySkip(
            InferenceOnlyError(
                f"torch.autograd.{kind} was called on spyre tensors ({shapes}): the Spyre "
                "device is inference-only (no training, no backward); run the training step "
                "on the CPU (model.cpu()) or keep the test on the host with "
                "@pytest.mark.no_spyre"
            )
        )


class BackwardGuard:
    """Wraps ``torch.autograd.backward``/``grad`` and the device tensor's ``backward`` between
    :meth:`install` and :meth:`uninstall`."""

    def __init__(self) -> None:
        self._saved: tuple[Any, Any, Any] | None = None

    def install(self) -> None:
        if self._saved is not None:
            return
        from spyre_sim import SpyreTensor

        backward, grad = torch.autograd.backward, torch.autograd.grad
        tensor_backward = SpyreTensor.backward

        def guarded_tensor_backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            _refuse("backward", self)

        def guarded_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            _refuse("backward", tensors)
            return backward(tensors, *args, **kwargs)

        def guarded_grad(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            _refuse("grad", outputs)
            return grad(outputs, *args, **kwargs)

        guarded_backward.__wrapped__ = backward  # type: ignore[attr-defined]
        guarded_grad.__wrapped__ = grad  # type: ignore[attr-defined]
        self._saved = (backward, grad, tensor_backward)
        torch.autograd.backward = guarded_backward
        torch.autograd.grad = guarded_grad
        SpyreTensor.backward = guarded_tensor_backward  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self._saved is None:
            return
        from spyre_sim import SpyreTensor

        torch.autograd.backward, torch.autograd.grad, tensor_backward = self._saved
        SpyreTensor.backward = tensor_backward  # type: ignore[method-assign]
        self._saved = None
