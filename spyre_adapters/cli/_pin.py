"""``spyre-adapters pin --stack R``: write (or update) the lock entry of a release.

The lock file (default ``spyre-adapters.lock``; format in :mod:`spyre_adapters.lock`) keeps the
entries of other releases; the write is atomic. The pinned set is printed (data on stdout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import FORMATS, TableData, diagnose, emit
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.lock import DEFAULT_LOCK_FILE, Lock, pin, read_lock, write_lock

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pin",
        help="pin the adapter set of a release in a lock file",
        description="Resolve the adapters for each --stack release and record names, versions "
        "and hashes in the lock file (other releases' entries are kept).",
    )
    parser.add_argument(
        "--stack", metavar="R", action="append", required=True, help="release to pin (repeatable)"
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


def run(args: argparse.Namespace) -> int:
    registry = registry_for(args)
    path = Path(args.lock)
    lock = read_lock(path) if path.exists() else Lock(source=str(path))
    names: list[str] = []
    for stack in args.stack:
        release = Lifecycle(registry).release(stack)
        lock = pin(registry, release, auto_retire=args.auto_retire, lock=lock)
        names.append(release.name)
    write_lock(lock, path)
    pinned = [lock.entries[name] for name in dict.fromkeys(names)]
    table = TableData(f"Pinned in {path}", ["release", "adapter", "version", "manifest sha256"])
    for entry in pinned:
        for p in entry.adapters:
            table.rows.append([entry.release, p.name, str(p.version), p.manifest_sha256[:12]])
    document = {
        "schema_version": 1,
        "kind": "pin",
        "lock": str(path),
        "releases": {
            entry.release: {
                "auto_retire": entry.auto_retire,
                "adapters": [{"name": p.name, "version": str(p.version)} for p in entry.adapters],
            }
            for entry in pinned
        },
    }
    args.output = None
    emit(args, document, [table])
    diagnose(f"wrote {path} ({', '.join(e.release for e in pinned)})")
    return ExitCode.OK
