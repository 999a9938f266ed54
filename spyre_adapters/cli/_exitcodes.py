"""The exit codes of ``spyre-adapters`` (stable: CI scripts depend on them)."""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    """What the exit status of ``spyre-adapters`` means."""

    #: everything fine
    OK = 0
    #: findings that fail a gate: overdue adapters (and, with --strict, retirable ones); a stale lock
    FINDINGS = 1
    #: usage error: bad options, unknown stack release or adapter name, unavailable subcommand,
    #: an output path that cannot be written (checked before any work)
    USAGE = 2
    #: invalid data: manifests, lock file, waivers file or release file; a tampered lock
    INVALID = 3
    #: the work was done but an output file could not be written where asked; the result was
    #: kept in a fallback file or printed, as stderr says
    WRITE_FAILED = 4

    @classmethod
    def help_text(cls) -> str:
        """The exit-code table shown at the end of ``--help``."""
        lines = ["exit codes:"]
        meanings = {
            cls.OK: "fine",
            cls.FINDINGS: "findings that fail a gate (overdue adapters; retirable/retired ones "
            "with --strict; a stale lock)",
            cls.USAGE: "usage error (bad options, unknown release or adapter, an output path "
            "that cannot be written)",
            cls.INVALID: "invalid manifests, lock, waivers or release file (or a tampered lock)",
            cls.WRITE_FAILED: "an output file could not be written after the work; the result "
            "was kept elsewhere (stderr says where)",
        }
        for code in cls:
            lines.append(f"  {code.value}  {code.name:<12} {meanings[code]}")
        return "\n".join(lines)
