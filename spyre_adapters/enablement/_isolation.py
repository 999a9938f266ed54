"""Isolated worker processes: run one function call in a child process with a time limit.

A crash (signal, abort, ``os._exit``, out of memory) or a hang in the child cannot take the
caller down: :func:`run_isolated` returns an :class:`Outcome` saying ``ok`` (with the value),
``raised`` (with the traceback text), ``crashed`` (with the exit code) or ``timeout`` (the child
was killed).

Children are forked from a ``forkserver`` that has already imported torch, transformers and the
device (:func:`isolation_context`), so starting one costs milliseconds instead of the seconds
those imports take; where ``forkserver`` is unavailable, ``spawn`` is used. The function must be
importable by name (a module-level function) and its arguments and result picklable.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

__all__ = ["Outcome", "isolation_context", "run_isolated"]

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


def _child(function: Callable[..., Any], args: tuple[Any, ...], conn: Connection) -> None:
    try:
        value = function(*args)
    except BaseException:
        conn.send(("raised", traceback.format_exc()))
    else:
        conn.send(("ok", value))
    conn.close()


def run_isolated(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    timeout: float,
    context: BaseContext | None = None,
) -> Outcome:
    """Call ``function(*args)`` in a child process; kill it after ``timeout`` seconds."""
    chosen: Any = isolation_context() if context is None else context
    receive, send = chosen.Pipe(duplex=False)
    process = chosen.Process(target=_child, args=(function, args, send), daemon=True)
    start = time.monotonic()
    process.start()
    send.close()
    message: tuple[str, Any] | None = None
    timed_out = False
    try:
        deadline = start + timeout
        while message is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if receive.poll(min(remaining, 0.5)):
                try:
                    message = receive.recv()
                except EOFError:  # the child closed its end without sending: it is dying
                    break
            elif not process.is_alive():
                break
    finally:
        receive.close()
    seconds = time.monotonic() - start
    if message is not None:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
        status, payload = message
        if status == "ok":
            return Outcome("ok", value=payload, seconds=seconds)
        return Outcome("raised", error=str(payload), seconds=seconds)
    if timed_out:
        process.kill()
        process.join()
        return Outcome("timeout", error=f"no result after {timeout:g} s; killed", seconds=seconds)
    process.join(10)  # its exit status may take a moment to arrive through the fork server
    if process.is_alive():
        process.kill()
        process.join()
    code = process.exitcode
    return Outcome(
        "crashed",
        error=f"worker exited with code {code} without a result",
        exitcode=code,
        seconds=seconds,
    )
