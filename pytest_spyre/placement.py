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

A model that reaches the device without ``.to`` (built under ``with torch.device("spyre")``,
moved with ``to_empty``, loaded with ``device_map="spyre"``) gets the adapters at its first
call: ``nn.Module.__call__`` is wrapped too, and an outermost call of a module whose
parameters are on the device, that is not (part of) a prepared model, prepares it first (on
the host and back, as ``.to`` would have).

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


def _wholly_on_device(module: nn.Module) -> bool:
    return all(t.device.type == "spyre" for t in (*module.parameters(), *module.buffers()))


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
        self._depth = 0  # module calls running (through the __call__ wrapper)
        self._members: weakref.WeakSet[nn.Module] = weakref.WeakSet()  # modules of prepared models
        self._original_to: Any = None
        self._original_cpu: Any = None
        self._original_call: Any = None

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

        original_call = nn.Module.__call__

        def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            if placement._depth == 0 and placement._arrived_unprepared(module):
                placement._prepare_where_it_is(original_to, module)
            placement._depth += 1
            try:
                return original_call(module, *args, **kwargs)
            finally:
                placement._depth -= 1

        to.__wrapped__ = original_to  # type: ignore[attr-defined]
        to.__doc__ = original_to.__doc__
        cpu.__wrapped__ = original_cpu  # type: ignore[attr-defined]
        cpu.__doc__ = original_cpu.__doc__
        call.__wrapped__ = original_call  # type: ignore[attr-defined]
        self._original_to, self._original_cpu = original_to, original_cpu
        self._original_call = original_call
        nn.Module.to = to  # type: ignore[method-assign,assignment]
        nn.Module.cpu = cpu  # type: ignore[method-assign,assignment]
        nn.Module.__call__ = call  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if not self.installed:
            return
        nn.Module.to = self._original_to  # type: ignore[method-assign]
        nn.Module.cpu = self._original_cpu  # type: ignore[method-assign]
        nn.Module.__call__ = self._original_call  # type: ignore[method-assign]
        self._original_to = self._original_cpu = self._original_call = None
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
                self._members.update(module.modules())
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

    def _arrived_unprepared(self, module: nn.Module) -> bool:
        """A model whose first call finds it on the device without having gone through
        ``.to``: built under ``with torch.device("spyre")``, ``to_empty(device=...)``,
        ``from_pretrained(..., device_map="spyre")``. Cheap for the common case (a model
        prepared by ``.to``, or one of its submodules)."""
        if not self.enabled or self._busy:
            return False
        if module in self._prepared or module in self._members:
            return False
        if not _on_device(module):
            return False
        import spyre_adapters

        return spyre_adapters.prepared_release(module) is None

    def _prepare_where_it_is(self, original_to: Any, module: nn.Module) -> None:
        """Apply the adapters to a model already on the device, as ``.to`` would have: on the
        host (adapters are written for host modules), then back to the device. The values make
        the round trip unchanged (the device's DL16 values are fp16 values)."""
        if not _wholly_on_device(module):
            # partly on the host, meta or disk (accelerate offload moves weights in at each
            # forward): prepared where it is, without a round trip
            self._busy = True
            try:
                applied = self._prepare(module)
                self._prepared[module] = None
                self._members.update(module.modules())
                self._on_applied(module, applied)
            finally:
                self._busy = False
            return
        self._busy = True
        try:
            original_to(module, "cpu")
            reference = None
            if self._on_agreement is not None:
                reference = CpuReference(module, self._on_agreement)
            try:
                applied = self._prepare(module)
            except BaseException:
                if reference is not None:
                    reference.remove()
                original_to(module, "spyre")
                raise
            self._prepared[module] = reference
            self._members.update(module.modules())
            original_to(module, "spyre")
            self._on_applied(module, applied)
        finally:
            self._busy = False
