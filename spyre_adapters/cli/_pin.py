"""``spyre-adapters pin``: write (or update) the lock tables of releases, or move one pin.

``pin --stack R [--stack R2 ...]`` resolves each release and writes its table (name, version,
manifest and implementation hashes, and the distribution and version providing each adapter);
the other releases' tables are kept. ``pin --upgrade NAME [--stack R ...]`` moves only the pin
of adapter NAME, in every release of the lock (or in the ``--stack`` releases), to what
resolution gives now, leaving every other pin as it is. The lock file (default
``spyre-adapters.lock``; format in :mod:`spyre_adapters.lock`) is checked before any work: a
path whose folder is missing or that is a folder is a usage error (exit 2). The write is atomic.
The pinned set is printed (data on stdout).

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "pin", "lock": "spyre-adapters.lock",
     "releases": {"2026.05": {"auto_retire": true,
                              "adapters": [{"name", "version", "distribution",
                                            "distribution_version"}]}},
     "moves": [{"release", "name", "from", "to"}]}     # with --upgrade (versions or null)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import FORMATS, TableData, diagnose, emit
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.lock import (
    DEFAULT_LOCK_FILE,
    Lock,
    PinMove,
    old_schema_releases,
    pin,
    read_lock,
    unwritable,
    upgrade,
    write_lock,
)

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pin",
        help="pin the adapter set of releases in a lock file, or move one pin (--upgrade)",
        description="Resolve the adapters for each --stack release and record names, versions, "
        "hashes and providing distributions in the lock file (other releases' tables are "
        "kept). With --upgrade NAME, move only NAME's pin to the version resolution gives now.",
    )
    parser.add_argument("--stack", metavar="R", action="append", help="release to pin (repeatable)")
    parser.add_argument(
        "--upgrade",
        metavar="NAME",
        action="append",
        help="move the pin of adapter NAME (repeatable), in every release of the lock or in "
        "the --stack releases",
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="lock",
        metavar="FILE",
        default=DEFAULT_LOCK_FILE,
        help=f"lock file to write (default: {DEFAULT_LOCK_FILE})",
    )
    parser.add_argument(
        "--no-auto-retire",
        dest="auto_retire",
        action="store_false",
        help="pin retirable scaffolding too",
    )
    parser.add_argument("--format", choices=FORMATS, default="table", help="how to print the pins")


def _move_text(move: PinMove) -> str:
    before = "-" if move.before is None else str(move.before)
    after = "-" if move.after is None else str(move.after)
    if move.before == move.after:
        return f"{move.name} {after} unchanged at {move.release}"
    return f"{move.name} {before} -> {after} at {move.release}"


def run(args: argparse.Namespace) -> int:
    if not args.stack and not args.upgrade:
        diagnose("error: pin needs --stack R (pin releases) or --upgrade NAME (move one pin)")
        return ExitCode.USAGE
    path = Path(args.lock)
    reason = unwritable(path)
    if reason is not None:
        diagnose(f"error: {reason}")
        return ExitCode.USAGE
    if args.upgrade and not path.exists():
        diagnose(f"error: no lock file {path} to upgrade; pin releases first with --stack R")
        return ExitCode.USAGE
    registry = registry_for(args, runs_adapters=False)
    old = old_schema_releases(path) if path.exists() and not args.upgrade else None
    if old is not None:
        dropped = ", ".join(old) or "none"
        diagnose(
            f"replacing {path}, a lock of an older spyre-adapters (schema 1; its tables: "
            f"{dropped}); only the releases pinned now are in the new one"
        )
        lock = Lock(source=str(path))
    else:
        lock = read_lock(path) if path.exists() else Lock(source=str(path))
    names: list[str] = []
    moves: list[PinMove] = []
    if args.upgrade:
        for name in args.upgrade:
            lock, moved = upgrade(lock, registry, name, args.stack)
            moves.extend(moved)
        names = [m.release for m in moves]
    else:
        for stack in args.stack:
            release = Lifecycle(registry).release(stack)
            lock = pin(registry, release, auto_retire=args.auto_retire, lock=lock)
            names.append(release.name)
    write_lock(lock, path)
    pinned = [lock.entries[name] for name in dict.fromkeys(names)]
    table = TableData(
        f"Pinned in {path}",
        ["release", "adapter", "version", "provided by", "implementation sha256"],
    )
    for entry in pinned:
        for p in entry.adapters:
            table.rows.append(
                [entry.release, p.name, str(p.version), p.provided_by, p.implementation_sha256[:12]]
            )
    document = {
        "schema_version": 1,
        "kind": "pin",
        "lock": str(path),
        "releases": {
            entry.release: {
                "auto_retire": entry.auto_retire,
                "adapters": [
                    {
                        "name": p.name,
                        "version": str(p.version),
                        "distribution": p.distribution,
                        "distribution_version": p.distribution_version,
                    }
                    for p in entry.adapters
                ],
            }
            for entry in pinned
        },
        "moves": [
            {
                "release": m.release,
                "name": m.name,
                "from": None if m.before is None else str(m.before),
                "to": None if m.after is None else str(m.after),
            }
            for m in moves
        ],
    }
    args.output = None
    emit(args, document, [table])
    for move in moves:
        diagnose(_move_text(move))
    diagnose(f"wrote {path} ({', '.join(e.release for e in pinned)})")
    return ExitCode.OK
