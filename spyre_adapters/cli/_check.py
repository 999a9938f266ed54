"""``spyre-adapters check``: is the lock file still true?

Exit status: 0 when every pin holds (a pin that a newer installed version supersedes at its
release is reported, like ``pip list --outdated``, and does not fail; nor does a pinned
version that a newer build of its distribution still ships unchanged); 1 when an entry is
stale (resolving the release now gives another set, or a pinned version is not installed:
re-pin); 3 when an entry is tampered (a manifest or implementation no longer hashes to the
recorded value), or the lock is missing or malformed, or has a table for a release the
catalogue does not know. Each finding names the release entry, the adapter and why; with
nothing to report, the output says that the lock is current.

JSON (``schema_version`` 1)::

    {"schema_version": 1, "kind": "check", "lock": "spyre-adapters.lock",
     "releases": ["2026.05"],
     "findings": [{"release", "adapter",
                   "kind": "stale"|"tampered"|"superseded"|"provider",
                   "message", "failing": true|false}],
     "passed": true}                  # no failing finding
"""

from __future__ import annotations

import argparse
import sys
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
        help="check the lock file: exit 1 when stale, 3 when tampered; report newer versions",
        description="Check that the lock file matches the installed adapters: stale entries "
        "(resolution differs) exit 1, tampered ones (a hash differs) exit 3; pins that a newer "
        "version supersedes are reported without failing.",
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


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


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
    registry = registry_for(args, runs_adapters=False)
    findings = check_lock(lock, registry, args.stack)
    lifecycle = Lifecycle(registry)
    specs = args.stack if args.stack else sorted(lock.entries)
    releases = [lifecycle.release(spec).name for spec in specs]
    checked = f"{_plural(len(releases), 'release', 'releases')} checked: {', '.join(releases)}"
    document = {
        "schema_version": 1,
        "kind": "check",
        "lock": str(path),
        "releases": list(releases),
        "findings": [
            {
                "release": f.release,
                "adapter": f.adapter,
                "kind": f.kind,
                "message": f.message,
                "failing": f.failing,
            }
            for f in findings
        ],
        "passed": not any(f.failing for f in findings),
    }
    current = f"the lock is current: every pin matches what is installed ({checked})"
    if not findings and args.format == "table" and not args.output:
        sys.stdout.write(current + "\n")
    else:
        table = TableData(
            f"Lock check of {path}",
            ["release", "adapter", "finding", "why"],
            [[f.release, f.adapter, f.kind, f.message] for f in findings]
            or [["-", "-", "-", current]],
            caption=checked,
            status_column=2,
        )
        emit(args, document, [table])
    for finding in findings:
        diagnose(str(finding))
    count = f"({len(releases)} release(s) checked)"
    if any(f.kind == "tampered" for f in findings):
        diagnose(f"{path} is tampered: review the changes, then re-pin")
        return ExitCode.INVALID
    if any(f.failing for f in findings):
        diagnose(f"{path} is stale: re-pin with `spyre-adapters pin --stack R`")
        return ExitCode.FINDINGS
    newer = {(f.adapter, f.release) for f in findings if f.kind == "superseded"}
    if newer:
        pins = _plural(len(newer), "pin has", "pins have")
        diagnose(
            f"{path} holds {count}; {pins} a newer version: "
            f"`spyre-adapters pin --upgrade NAME` moves one"
        )
        return ExitCode.OK
    diagnose(f"{path} is current {count}")
    return ExitCode.OK
