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
    #: usage error: bad options, unknown stack release or adapter name, unavailable subcommand
    USAGE = 2
    #: invalid data: manifests, lock file, waivers file or release file; a tampered lock
    INVALID = 3

    @classmethod
    def help_text(cls) -> str:
        """The exit-code table shown at the end of ``--help``."""
        lines = ["exit codes:"]
        meanings = {
            cls.OK: "fine",
            cls.FINDINGS: "findings that fail a gate (overdue adapters; retirable/retired ones "
            "with --strict; a stale lock)",
            cls.USAGE: "usage error (bad options, unknown release or adapter)",
            cls.INVALID: "invalid manifests, lock, waivers or release file (or a tampered lock)",
        }
        for code in cls:
            lines.append(f"  {code.value}  {code.name:<9} {meanings[code]}")
        return "\n".join(lines)
