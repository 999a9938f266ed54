"""``spyre-adapters check``: is the lock file still true?

Exit status: 0 when every entry matches; 1 when an entry is stale (resolving the release now
gives another set: re-pin); 3 when an entry is tampered (a manifest or implementation no longer
hashes to the recorded value), or the lock is missing or malformed. Each finding names the
release entry, the adapter and why.

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "check", "lock": "spyre-adapters.lock",
     "releases": ["2026.05"],
     "findings": [{"release", "adapter", "kind": "stale"|"tampered", "message"}],
     "passed": true}
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, diagnose, emit
from spyre_adapters.errors import LockError, Problem
from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.lock import DEFAULT_LOCK_FILE, check_lock, read_lock

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check the lock file: exit 1 when stale, 3 when tampered",
        description="Check that the lock file matches the installed adapters: stale entries "
        "(resolution differs) exit 1, tampered ones (a hash differs) exit 3.",
    )
    parser.add_argument(
        "--lock",
        metavar="FILE",
        default=DEFAULT_LOCK_FILE,
        help=f"lock file to check (default: {DEFAULT_LOCK_FILE})",
    )
    parser.add_argument(
        "--stack", metavar="R", action="append", help="check only this release (repeatable)"
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    path = Path(args.lock)
    if not path.exists():
        raise LockError(
            [
                Problem(
                    str(path),
                    "",
                    "no lock file here; create it with `spyre-adapters pin --stack R`",
                )
            ]
        )
    lock = read_lock(path)
    registry = registry_for(args)
    lifecycle = Lifecycle(registry)
    specs = args.stack if args.stack else sorted(lock.entries)
    releases = [lifecycle.release(spec).name for spec in specs]
    findings = check_lock(lock, registry, specs)
    table = TableData(
        f"Lock check of {path}",
        ["release", "adapter", "finding", "why"],
        [[f.release, f.adapter, f.kind, f.message] for f in findings],
        caption=f"{len(releases)} release(s) checked: {', '.join(releases)}",
        status_column=2,
    )
    document = {
        "schema_version": 1,
        "kind": "check",
        "lock": str(path),
        "releases": list(releases),
        "findings": [
            {"release": f.release, "adapter": f.adapter, "kind": f.kind, "message": f.message}
            for f in findings
        ],
        "passed": not findings,
    }
    emit(args, document, [table])
    for finding in findings:
        diagnose(str(finding))
    if any(f.kind == "tampered" for f in findings):
        diagnose(f"{path} is tampered: review the changes, then re-pin")
        return ExitCode.INVALID
    if findings:
        diagnose(f"{path} is stale: re-pin with `spyre-adapters pin --stack R`")
        return ExitCode.FINDINGS
    diagnose(f"{path} is up to date ({len(releases)} release(s))")
    return ExitCode.OK
