"""Worker pool: the previous hand-made isolation (one forkserver child per call, fed by a
thread pool) against ``spyre_adapters.enablement._isolation.WorkerPool`` (pebble), side by side.

Two measurements, both run in one process from the same preloaded fork server, each side run
twice in the order old, new, new, old (so a load that drifts weighs on both alike):

- per-call overhead: ``--calls`` trivial calls (``os.getpid``), ``--jobs`` at a time;
- a sweep: ``--families`` model types (every k-th buildable one) triaged at ``--stack``,
  ``--jobs`` at a time, with the sweep's own worker; the verdicts of both must agree.

    python benchmarks/bench_isolation.py                 # 20 families at 2026.09, 2 jobs
    python benchmarks/bench_isolation.py --families 10   # a quicker look
    python benchmarks/bench_isolation.py --families 40 --stack 2026.05 --jobs 2

Prints the wall seconds of each and the ratio new / old (below 1: the pool is faster).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

from spyre_adapters.enablement._isolation import _PRELOAD, Outcome, WorkerPool


def _child(function: Callable[..., Any], args: tuple[Any, ...], conn: Connection) -> None:
    try:
        value = function(*args)
    except BaseException:
        conn.send(("raised", traceback.format_exc()))
    else:
        conn.send(("ok", value))
    conn.close()


def legacy_run(
    function: Callable[..., Any], args: tuple[Any, ...], timeout: float, context: BaseContext
) -> Outcome:
    """The previous implementation: one child process per call, polled through a pipe."""
    chosen: Any = context
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
                except EOFError:
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
        return Outcome("timeout", seconds=seconds)
    process.join(10)
    return Outcome("crashed", exitcode=process.exitcode, seconds=seconds)


def _context() -> BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    return context


def run_old(
    function: Callable[..., Any], calls: Sequence[tuple[Any, ...]], jobs: int, timeout: float
) -> tuple[float, list[Outcome]]:
    context = _context()
    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(legacy_run, function, a, timeout, context) for a in calls]
        outcomes = [f.result() for f in futures]
    return time.perf_counter() - start, outcomes


def run_new(
    function: Callable[..., Any], calls: Sequence[tuple[Any, ...]], jobs: int, timeout: float
) -> tuple[float, list[Outcome]]:
    context = _context()
    start = time.perf_counter()
    with WorkerPool(jobs, context) as workers, ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(workers.run, function, a, timeout) for a in calls]
        outcomes = [f.result() for f in futures]
    return time.perf_counter() - start, outcomes


def _warm(jobs: int) -> None:
    """Start both fork servers' preloads once, so neither side pays the first import."""
    for runner in (run_old, run_new):
        runner(os.getpid, [()] * jobs, jobs, 600)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=20)
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)

    from spyre_adapters.enablement.families import candidate_families
    from spyre_adapters.enablement.sweep import triage_worker

    _warm(args.jobs)
    # old, new, new, old: a load that drifts during the run weighs on both sides alike
    order = (run_old, run_new, run_new, run_old)
    trivial = [()] * args.calls
    seconds = {run_old: 0.0, run_new: 0.0}
    for runner in order:
        seconds[runner] += runner(os.getpid, trivial, args.jobs, args.timeout)[0]
    old_s, new_s = seconds[run_old], seconds[run_new]
    print(f"{args.calls} trivial calls, {args.jobs} at a time, twice each: old {old_s:.2f} s, "
          f"new {new_s:.2f} s, new/old {new_s / old_s:.2f}")  # fmt: skip

    every = candidate_families()
    step = max(1, len(every) // args.families)
    families = every[::step][: args.families]
    calls = [(f, [args.stack], "realistic", True) for f in families]
    seconds = {run_old: 0.0, run_new: 0.0}
    outcomes: dict[Any, list[Outcome]] = {}
    for runner in order:
        took, outcomes[runner] = runner(triage_worker, calls, args.jobs, args.timeout)
        seconds[runner] += took
    old_s, new_s = seconds[run_old], seconds[run_new]
    old, new = outcomes[run_old], outcomes[run_new]

    def verdicts(outcomes: list[Outcome]) -> list[str]:
        return [
            o.value[0]["category"] if o.status == "ok" else f"worker {o.status}" for o in outcomes
        ]

    same = verdicts(old) == verdicts(new)
    print(f"sweep of {len(families)} families at {args.stack}, {args.jobs} jobs, twice each: old "
          f"{old_s:.1f} s, new {new_s:.1f} s, new/old {new_s / old_s:.2f}; "
          f"verdicts {'identical' if same else 'DIFFER'}")  # fmt: skip
    if not same:
        for family, a, b in zip(families, verdicts(old), verdicts(new), strict=True):
            if a != b:
                print(f"  {family}: old {a}, new {b}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
