"""Apply adapters when a model moves to the device, undo them when it leaves.

While a ``--spyre`` run is active, ``nn.Module.to`` and ``nn.Module.cpu`` are wrapped (and put
back at the end of the run, :meth:`Placement.uninstall`):

- ``model.to("spyre")`` / ``model.to(torch_device)``: the adapters resolved for the release (or
  the lock) are applied on the host first (``spyre_adapters.prepare``), then the model moves.
  Adapters are applied on the host so that the modules they replace stay on the host with the
  edit that holds them, and the restored model is whole again after ``.to("cpu")``;
- ``model.to("cpu")`` / ``model.cpu()``: the model moves back, then ``spyre_adapters.restore``
  undoes the adapters, so ``save_pretrained`` sees the stock model;
- a ``no_spyre`` test (``enabled`` false) goes through untouched.

Which adapters were applied, per model, is handed to ``on_applied`` so the run can record it on
the current test. Moving a model that is already on the device again is a plain ``.to``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from pytest_spyre.compare import CpuReference
from pytest_spyre.record import Agreement

__all__ = ["Placement"]

Prepare = Callable[[nn.Module], list[str]]  # applies adapters, returns "name version" entries
Restore = Callable[[nn.Module], None]


def _target_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    parsed: tuple[Any, ...] = torch._C._nn._parse_to(*args, **kwargs)
    device: torch.device | None = parsed[0]
    return device


def _on_device(module: nn.Module) -> bool:
    for param in module.parameters():
        return param.device.type == "spyre"
    for buffer in module.buffers():
        return buffer.device.type == "spyre"
    return False


class Placement:
    """The ``nn.Module.to`` / ``nn.Module.cpu`` wrappers of one run."""

    def __init__(
        self,
        prepare: Prepare,
        restore: Restore,
        on_applied: Callable[[nn.Module, list[str]], None],
        on_agreement: Callable[[Agreement], None] | None,
    ) -> None:
        self._prepare = prepare
        self._restore = restore
        self._on_applied = on_applied
        self._on_agreement = on_agreement
        self.enabled = True
        self._prepared: weakref.WeakKeyDictionary[nn.Module, CpuReference | None] = (
            weakref.WeakKeyDictionary()
        )
        self._busy = False
        self._original_to: Any = None
        self._original_cpu: Any = None

    @property
    def installed(self) -> bool:
        return self._original_to is not None

    def install(self) -> None:
        if self.installed:
            return
        original_to = nn.Module.to
        original_cpu = nn.Module.cpu
        placement = self

        def to(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            return placement._to(original_to, module, args, kwargs)

        def cpu(module: nn.Module) -> Any:
            return placement._to(original_to, module, ("cpu",), {})

        to.__wrapped__ = original_to  # type: ignore[attr-defined]
        to.__doc__ = original_to.__doc__
        cpu.__wrapped__ = original_cpu  # type: ignore[attr-defined]
        cpu.__doc__ = original_cpu.__doc__
        self._original_to, self._original_cpu = original_to, original_cpu
        nn.Module.to = to  # type: ignore[method-assign,assignment]
        nn.Module.cpu = cpu  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        if not self.installed:
            return
        nn.Module.to = self._original_to  # type: ignore[method-assign]
        nn.Module.cpu = self._original_cpu  # type: ignore[method-assign]
        self._original_to = self._original_cpu = None
        for model, reference in list(self._prepared.items()):
            if reference is not None:
                reference.remove()
            self._prepared.pop(model, None)

    def _to(self, original: Any, module: nn.Module, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:  # fmt: skip
        if self._busy or not self.enabled:
            return original(module, *args, **kwargs)
        device = _target_device(args, kwargs)
        if device is None:
            return original(module, *args, **kwargs)
        self._busy = True
        try:
            if device.type == "spyre" and module not in self._prepared and not _on_device(module):
                reference = None
                if self._on_agreement is not None:
                    reference = CpuReference(module, self._on_agreement)
                try:
                    applied = self._prepare(module)
                    self._prepared[module] = reference
                except BaseException:
                    if reference is not None:
                        reference.remove()
                    raise
                self._on_applied(module, applied)
                return original(module, *args, **kwargs)
            if device.type != "spyre" and module in self._prepared:
                result = original(module, *args, **kwargs)
                reference = self._prepared.pop(module)
                if reference is not None:
                    reference.remove()
                self._restore(module)
                return result
            return original(module, *args, **kwargs)
        finally:
            self._busy = False
