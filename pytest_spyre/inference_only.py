"""The device is inference-only: recognising training in a test, and stopping backward early.

A test is reported as an inference-only skip (not as a failure) when the device error that
stopped it is :class:`~spyre_sim.InferenceOnlyError`, or a lowering error raised under
``torch.autograd.backward``/``grad`` (:func:`in_backward`), or a lowering error of an op only
training dispatches (:func:`is_training_op`: losses, training-mode dropout).

Stopping a backward pass on device tensors before autograd's engine starts: the device is
inference-only. ``spyre_sim`` raises :class:`~spyre_sim.InferenceOnlyError` for
ops that autograd's engine runs on spyre tensors, but a test should not depend on what the
engine does with an exception raised in its worker (an abort takes the whole test process with
it, and on old releases the seed gradient's ``ones_like`` fails first with an unrelated lowering
error). So while a ``--spyre`` run is active, ``torch.autograd.backward`` and
``torch.autograd.grad`` (which ``Tensor.backward`` calls) check their outputs first and raise
:class:`InferenceOnlySkip` when any lives on the device; host tensors go through untouched.
That is a pytest skip outcome carrying the :class:`~spyre_sim.InferenceOnlyError` message, not
the error itself: pytest reports a skip without rendering the traceback an error gets, which
through a model's frames costs about half a second per test (5 training tests of the example
suite spent 2.5 s there). Test code cannot swallow it with ``except Exception`` either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from _pytest.outcomes import Skipped  # pytest.skip.Exception, as a class mypy can subclass

from spyre_sim import InferenceOnlyError

__all__ = ["BackwardGuard", "InferenceOnlySkip", "in_backward", "is_training_op", "skip_reason"]


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


def is_training_op(op: str) -> bool:
    """An op only training dispatches: a loss (``aten.nll_loss_forward``, ``aten.mse_loss``...;
    an inference-only stack has no loss kernels) or dropout in training mode
    (``aten.native_dropout``; in eval mode dropout dispatches nothing)."""
    parts = op.split(".")
    packet = parts[1] if len(parts) > 1 else op
    return "loss" in packet or "dropout" in packet


def in_backward(exc: BaseException | None) -> bool:
    """Whether a device error was raised under ``torch.autograd.backward``/``grad``: autograd
    runs some ops (``ones_like`` for the seed gradient) before its engine starts, so on an old
    release the first error a backward meets is a lowering error, not ``InferenceOnlyError``."""
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in ("backward", "grad") and "autograd" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


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
    """Wraps ``torch.autograd.backward``/``grad`` between :meth:`install` and :meth:`uninstall`."""

    def __init__(self) -> None:
        self._saved: tuple[Any, Any] | None = None

    def install(self) -> None:
        if self._saved is not None:
            return
        backward, grad = torch.autograd.backward, torch.autograd.grad

        def guarded_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            _refuse("backward", tensors)
            return backward(tensors, *args, **kwargs)

        def guarded_grad(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            _refuse("grad", outputs)
            return grad(outputs, *args, **kwargs)

        guarded_backward.__wrapped__ = backward  # type: ignore[attr-defined]
        guarded_grad.__wrapped__ = grad  # type: ignore[attr-defined]
        self._saved = (backward, grad)
        torch.autograd.backward = guarded_backward
        torch.autograd.grad = guarded_grad

    def uninstall(self) -> None:
        if self._saved is None:
            return
        torch.autograd.backward, torch.autograd.grad = self._saved
        self._saved = None
