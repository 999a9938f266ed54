"""Isolated worker processes: run function calls in child processes, each with a time limit.

A crash (signal, abort, ``os._exit``, out of memory) or a hang in a child cannot take the
caller down: each call returns an :class:`Outcome` saying ``ok`` (with the value), ``raised``
(with the traceback text), ``crashed`` (with the exit code) or ``timeout`` (the child was
killed).

A :class:`WorkerPool` is a :class:`pebble.ProcessPool` of ``jobs`` processes that runs one call
per process (a fresh process for every call, so no state leaks from one family to the next)
with a timeout per call; :func:`run_isolated` is one call in a pool of its own. Children are
forked from a ``forkserver`` that has already imported torch, transformers and the device
(:func:`isolation_context`), so starting one costs milliseconds instead of the seconds those
imports take; where ``forkserver`` is unavailable, ``spawn`` is used. The function must be
importable by name (a module-level function) and its arguments and result picklable.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from types import TracebackType
from typing import Any

from pebble import ProcessExpired, ProcessPool

__all__ = ["Outcome", "WorkerPool", "isolation_context", "run_isolated"]

# What every worker needs, imported once in the fork server (about 8 s per worker otherwise).
_PRELOAD = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.masking_utils",
    "transformers.models.auto.modeling_auto",
    "spyre_sim",
    "spyre_adapters.enablement.triage",
)


@dataclass(frozen=True)
class Outcome:
    """How an isolated call ended. ``status``: ``ok``, ``raised``, ``crashed`` or ``timeout``."""

    status: str
    value: Any = None
    error: str = ""
    exitcode: int | None = None
    seconds: float = 0.0


@functools.cache
def isolation_context(preload: Sequence[str] = _PRELOAD) -> BaseContext:
    """The multiprocessing context children start from (one forkserver per process)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(preload))
        return context
    return multiprocessing.get_context("spawn")


class WorkerPool:
    """``jobs`` worker processes started from ``context`` (default :func:`isolation_context`),
    one call per process. :meth:`run` blocks until its call ends; call it from up to ``jobs``
    threads at once. Use as a context manager: leaving it stops the workers."""

    def __init__(self, jobs: int = 1, context: BaseContext | None = None) -> None:
        chosen = isolation_context() if context is None else context
        self._pool = ProcessPool(max_workers=max(1, jobs), max_tasks=1, context=chosen)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (a call still running is killed)."""
        self._pool.stop()  # type: ignore[no-untyped-call]  # pebble leaves stop() unannotated
        self._pool.join()

    def run(self, function: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Outcome:
        """Call ``function(*args)`` in a worker process; kill it after ``timeout`` seconds."""
        start = time.monotonic()
        future = self._pool.schedule(function, args, timeout=timeout)
        try:
            value = future.result()
        except FutureTimeout:
            return Outcome(
                "timeout",
                error=f"no result after {timeout:g} s; killed",
                seconds=time.monotonic() - start,
            )
        except ProcessExpired as expired:
            code = expired.exitcode
            return Outcome(
                "crashed",
                error=f"worker exited with code {code} without a result",
                exitcode=code,
                seconds=time.monotonic() - start,
            )
        except Exception as raised:
            text = getattr(raised, "traceback", None) or f"{type(raised).__name__}: {raised}"
            return Outcome("raised", error=str(text), seconds=time.monotonic() - start)
        return Outcome("ok", value=value, seconds=time.monotonic() - start)


def run_isolated(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    timeout: float,
    context: BaseContext | None = None,
    pool: WorkerPool | None = None,
) -> Outcome:
    """Call ``function(*args)`` in a child process (a worker of ``pool``, else of a pool of
    its own started from ``context``); kill it after ``timeout`` seconds."""
    if pool is not None:
        return pool.run(function, args, timeout)
    with WorkerPool(1, context) as own:
        return own.run(function, args, timeout)
