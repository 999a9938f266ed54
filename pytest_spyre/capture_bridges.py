"""``--spyre-capture-bridges DIR``: the arguments of every op a test meets that the release refuses.

A test suite reaches ops that a family's plain forward never does (the loss of a forward with
``labels``, the bookkeeping of ``generate``). With this option, each test's setup, call and
teardown run under a dispatch mode that watches for the device's lowering errors: for each
call of an op that the release refuses **itself** (a lowering error naming that op, not a layout
rule), issued **inside the model scope** (a module forward or a generation call; harness work
is not the stack's concern) and not in a training step, the call's arguments are copied to the
host as a bridge sample (:class:`~spyre_adapters.enablement.op_validation.Sample`, labelled
with the test id and the module path), with the op's gap and the model type running.

- Calls that an applied op bridge then computes (the release refuses them, the bridge catches
  the error) are not kept: the bridge already answers them. Transfers (``x.to("cpu")``) are
  never kept.
- Bounded: at most :data:`~spyre_adapters.enablement.captured.MAX_SIGNATURES` distinct
  signatures per op (the first met), and nothing is copied for a signature already kept. The
  copies are device-to-host transfers, counted by the device like any other.
- At the end of the session each process (an xdist worker too) writes its own capture file into
  DIR, atomically (:func:`~spyre_adapters.enablement.captured.write_capture`); a folder
  gathers the captures of many runs. ``.ci/generate_bridges.py --samples DIR`` validates the
  candidates on them and writes generated adapters.

The test outcomes are not changed: a refused op still fails its test as without the option.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_spyre.distributed import is_worker
from pytest_spyre.session import DeviceSession
from spyre_adapters.enablement.captured import (
    MAX_SIGNATURES,
    MAX_TESTS,
    CapturedOp,
    capture_label,
    write_capture,
)
from spyre_adapters.enablement.op_samples import Sample, describe, sample_of
from spyre_adapters.library.op_bridge import observe, op_name
from spyre_sim import SpyreLayoutError, SpyreLoweringError, in_model_scope

__all__ = ["BridgeCapture"]


def _model_type() -> str | None:
    """The ``model_type`` of the innermost model on the Python call stack (its forward or its
    ``generate``), or ``None``."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module):
            kind = getattr(getattr(owner, "config", None), "model_type", None)
            if isinstance(kind, str) and kind:
                return kind
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _moves(func: OpOverload, kwargs: Mapping[str, Any]) -> bool:
    return kwargs.get("device") is not None or op_name(func).split(".")[1] in (
        "_to_copy",
        "_copy_from",
        "copy_",
    )


class _Entry:
    def __init__(self, gap: str) -> None:
        self.gap = gap
        self.samples: dict[str, Sample] = {}
        self.tests: list[str] = []
        self.families: list[str] = []


class _Watch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Copies the arguments of refused calls (see the module docstring) into ``pending``."""

    def __init__(self, capture: BridgeCapture) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capture = capture

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return func(*args, **(kwargs or {}))
        except SpyreLoweringError as error:
            self.capture.refused(func, args, kwargs or {}, error)
            raise


class BridgeCapture:
    """The plugin object of ``--spyre-capture-bridges`` (see the module docstring)."""

    def __init__(self, session: DeviceSession, directory: Path) -> None:
        self.session = session
        self.directory = directory
        self.kept: dict[str, _Entry] = {}
        self.written: Path | None = None
        self.write_error: str | None = None
        self._test = ""
        # this test's refused calls not (yet) known to be bridged: (op, signature)
        self._pending: list[tuple[str, str, Sample | None, str, str | None]] = []

    # -- the watch ------------------------------------------------------------------------------
    def refused(
        self,
        func: OpOverload,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        error: SpyreLoweringError,
    ) -> None:
        name = op_name(func)
        if (
            isinstance(error, SpyreLayoutError)
            or error.op != name
            or error.in_training
            or _moves(func, kwargs)
            or not in_model_scope()
        ):
            return
        signature = describe(args, kwargs)
        entry = self.kept.get(name)
        known = entry is not None and (
            signature in entry.samples or len(entry.samples) >= MAX_SIGNATURES
        )
        sample = None
        if not known and not any(p[0] == name and p[1] == signature for p in self._pending):
            sample = sample_of(args, kwargs, capture_label(self._test, error.module_path))
        self._pending.append((name, signature, sample, error.gap, _model_type()))

    def _bridged(self, func: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """An applied op bridge computes this call: the refusal just recorded is answered."""
        name = op_name(func)
        if self._pending and self._pending[-1][0] == name:
            self._pending.pop()

    def _settle(self) -> None:
        for name, signature, sample, gap, family in self._pending:
            entry = self.kept.setdefault(name, _Entry(gap))
            if sample is not None and len(entry.samples) < MAX_SIGNATURES:
                entry.samples.setdefault(signature, sample)
            if self._test not in entry.tests and len(entry.tests) < MAX_TESTS:
                entry.tests.append(self._test)
            if family is not None and family not in entry.families:
                entry.families.append(family)
        self._pending.clear()

    def _watched(self, item: pytest.Item) -> Generator[None, Any, Any]:
        self._test = item.nodeid
        watch = _Watch(self)
        try:
            with observe(self._bridged), watch:
                return (yield)
        finally:
            self._settle()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._watched(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._watched(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._watched(item))

    # -- the file -------------------------------------------------------------------------------
    def ops(self) -> dict[str, CapturedOp]:
        """What was kept, per op."""
        release = self.session.release.name
        return {
            name: CapturedOp(
                name,
                entry.gap,
                tuple(entry.samples.values()),
                tuple(entry.tests),
                tuple(sorted(entry.families)),
                (release,),
            )
            for name, entry in sorted(self.kept.items())
        }

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        ops = self.ops()
        if not ops:
            return
        tag = ""
        if is_worker(self.session.config):
            tag = str(getattr(self.session.config, "workerinput", {}).get("workerid", "worker"))
        try:
            self.written = write_capture(self.directory, self.session.release.name, ops, tag=tag)
        except OSError as exc:
            self.write_error = f"{self.directory}: {exc.strerror or exc}"
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if is_worker(self.session.config):
            return
        if self.write_error is not None:
            terminalreporter.write_line(
                f"spyre: bridge samples NOT written: {self.write_error}", red=True
            )
            return
        ops = self.ops()
        if self.written is not None:
            count = sum(len(c.samples) for c in ops.values())
            listed = ", ".join(f"{c.op} ({c.gap}, {len(c.tests)} tests)" for c in ops.values())
            terminalreporter.write_line(
                f"spyre: captured {count} bridge samples of {len(ops)} refused ops: {listed}; "
                f"written to {self.written}"
            )
        elif self._workers():
            terminalreporter.write_line(
                f"spyre: each xdist worker writes its bridge samples into {self.directory}"
            )
        else:
            terminalreporter.write_line(
                "spyre: no op was refused inside the model scope: no bridge samples captured"
            )

    def _workers(self) -> bool:
        return bool(getattr(self.session.config.option, "numprocesses", None))
