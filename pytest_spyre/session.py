"""The device side of one ``--spyre`` run: release, settings, adapters, and the hooks into torch.

Imported only when the device is on (it imports torch, ``spyre_sim`` and ``spyre_adapters``).
:class:`DeviceSession` is created by :mod:`pytest_spyre.plugin` in ``pytest_configure`` and
closed in ``pytest_unconfigure``. :meth:`DeviceSession.start`:

- resolves the stack release and makes it active (seen through the unsupported-op policy,
  :mod:`pytest_spyre.policy`) and applies the device switches: numerics, layout checks, and
  whether harness ops are judged (``--spyre-harness``, :mod:`spyre_sim.scope`);
- loads the adapters resolved for the release, or pinned by the lock
  (:mod:`pytest_spyre.adapters`), and wraps ``nn.Module.to``/``cpu`` so they are applied when a
  model moves to the device (:mod:`pytest_spyre.placement`);
- refuses backward on device tensors early (:mod:`pytest_spyre.inference_only`), records failed
  closeness checks (:mod:`pytest_spyre.precision`) and adds hints to the device's errors: the
  adapters that bridge the gap *for the model that hit it* (:mod:`spyre_adapters.bridging`).

Everything is undone by :meth:`DeviceSession.stop`, in reverse order.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import ExitStack

import pytest
from torch import nn

from pytest_spyre.adapters import AdapterView
from pytest_spyre.inference_only import BackwardGuard
from pytest_spyre.options import SpyreOptions
from pytest_spyre.placement import Placement
from pytest_spyre.policy import apply_policy
from pytest_spyre.precision import ClosenessLog
from pytest_spyre.record import Agreement
from spyre_adapters.bridging import bridges_for
from spyre_sim import SpyreLoweringError, SpyreSimError, hints
from spyre_sim.catalogue import Release, builtin_catalogue, resolve_stack
from spyre_sim.settings import configure
from spyre_sim.stack import current_stack, use_stack

__all__ = ["DeviceSession"]

Listener = Callable[[nn.Module, list[str]], None]


class DeviceSession:
    """The device side of a run (see the module docstring)."""

    def __init__(self, config: pytest.Config, options: SpyreOptions) -> None:
        self.config = config
        self.options = options
        self.release: Release
        self.adapters: AdapterView
        self.placement: Placement | None = None
        self.closeness = ClosenessLog()
        self._stack = ExitStack()
        # set by the recorder for the test running now
        self.on_applied: Listener | None = None
        self.on_agreement: Callable[[Agreement], None] | None = None
        self.on_adapter_error: Callable[[str], None] | None = None
        # the adapters the hint provider named for each device error ("name version")
        self.bridges: weakref.WeakKeyDictionary[BaseException, list[str]] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def builtin(self) -> bool:
        """Whether the release is a built-in one (not a user release file)."""
        return any(r.source == self.release.source for r in builtin_catalogue().releases)

    @property
    def device_format(self) -> str:
        """How the device stores float values in this run, for precision reports."""
        if self.options.numerics:
            return "DL16 (float16/float32 stored as DLFloat16: 9 fraction bits, no subnormals)"
        return "host dtypes (numerics emulation off)"

    @property
    def device_epsilon(self) -> float | None:
        """The epsilon of the device's float format in this run (DL16's 9 fraction bits), or
        ``None`` when values keep their host dtypes."""
        if self.options.numerics:
            from spyre_sim.numerics import DL16_FRACTION_BITS

            return 2.0**-DL16_FRACTION_BITS
        return None

    def start(self) -> None:
        opts = self.options
        try:
            self.release = resolve_stack(opts.stack) if opts.stack else current_stack()
        except (SpyreSimError, OSError) as exc:
            raise pytest.UsageError(
                f"--spyre-stack: {opts.stack!r} (from {(opts.sources or {}).get('spyre_stack')}) "
                f"cannot be used: {exc}"
            ) from exc
        # the policy is a view of the release; reports keep naming the release itself
        self._stack.enter_context(use_stack(apply_policy(self.release, opts.unsupported)))
        self._stack.enter_context(
            configure(
                numerics=opts.numerics,
                layout_checks=opts.layout_checks,
                judge_harness=opts.harness == "device",
            )
        )
        self.adapters = AdapterView.load(self.release, opts.lock)
        self.placement = Placement(
            prepare=self._prepare,
            restore=_restore,
            on_applied=self._applied,
            on_agreement=self._agreement if opts.compare else None,
        )
        self.placement.install()
        self._stack.callback(self.placement.uninstall)
        guard = BackwardGuard()
        guard.install()
        self._stack.callback(guard.uninstall)
        self.closeness.install()
        self._stack.callback(self.closeness.uninstall)
        self._stack.callback(hints.add_provider(self._hint))

    def stop(self) -> None:
        self._stack.close()

    # -- callbacks ------------------------------------------------------------------------
    def _prepare(self, model: nn.Module) -> list[str]:
        try:
            return self.adapters.prepare(model)
        except Exception as exc:
            from spyre_adapters.errors import AdapterApplyError

            if isinstance(exc, AdapterApplyError) and self.on_adapter_error is not None:
                self.on_adapter_error(f"{exc.adapter} {exc.version}: {exc.stage}")
            raise

    def _applied(self, model: nn.Module, applied: list[str]) -> None:
        if self.on_applied is not None:
            self.on_applied(model, applied)

    def _agreement(self, value: Agreement) -> None:
        if self.on_agreement is not None:
            self.on_agreement(value)

    def _hint(self, error: SpyreLoweringError, model: nn.Module | None) -> None:
        bridges = bridges_for(
            model, error.gap, self.release, self.adapters.registry, op=_overload_name(error.op)
        )
        for bridge in bridges:
            error.add_hint(bridge.describe(error.gap, self.release.name))
        self.bridges[error] = [f"{b.name} {b.version}" for b in bridges]


def _restore(model: nn.Module) -> None:
    import spyre_adapters

    spyre_adapters.restore(model)


def _overload_name(op: str | None) -> str | None:
    """``"aten.add.Tensor"`` for an error's op (``"aten.add"`` reads as ``.default``)."""
    if not op:
        return None
    return op if op.count(".") >= 2 else f"{op}.default"
