"""Problems found in input files, and the one way every input of the project reports them.

Four inputs are validated: the stack catalogue (release files and ``gaps.toml``, here in
:mod:`spyre_sim.catalogue`) and, in :mod:`spyre_adapters`, adapter manifests, lock files and
waivers. Each validator collects every problem it finds (never only the first) as a
:class:`Problem` (the file, the key path inside it, what is wrong and what to do) and raises one
error listing them all, rendered by :func:`problems_message`::

    2 problems in stack-release data:
      - my-2026.11.toml: release.base: unknown base release; valid releases: ... (got "2026.10")
      - my-2026.11.toml: ops."aten.sin": unknown decision ... (got "natve")

:func:`read_toml` is the first step of each: the bytes of a file as a TOML document, or the
problem that they are not one. A problem of the file as a whole has an empty key.

Plain Python: this module imports neither torch nor the catalogue.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Problem", "problems_message", "read_toml", "read_toml_file"]


@dataclass(frozen=True)
class Problem:
    """One problem found in an input: ``where`` is the file, ``key`` the dotted key path inside
    it (``""`` for the file as a whole), ``message`` what is wrong and what to do."""

    where: str
    key: str
    message: str

    def __str__(self) -> str:
        key = f": {self.key}" if self.key else ""
        return f"{self.where}{key}: {self.message}"


def problems_message(subject: str, problems: Sequence[Problem]) -> str:
    """The message of an error listing ``problems`` of ``subject`` (``"adapter manifests"``)."""
    count = len(problems)
    head = f"{count} problem{'s' if count != 1 else ''} in {subject}"
    return head + ":\n" + "\n".join(f"  - {p}" for p in problems)


def read_toml(raw: bytes, where: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The TOML document in ``raw`` (read from ``where``), or ``None`` and the problem."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(where, "", f"is not UTF-8 text: {exc}")]
    try:
        return tomllib.loads(text), []
    except tomllib.TOMLDecodeError as exc:
        return None, [Problem(where, "", f"is not valid TOML: {exc}")]


def read_toml_file(path: Any, where: str) -> tuple[bytes, dict[str, Any] | None, list[Problem]]:
    """The bytes of the file at ``path`` (anything with ``read_bytes()``) and its TOML document,
    or the problem that it cannot be read or parsed (``b""`` when it cannot be read)."""
    try:
        raw: bytes = path.read_bytes()
    except OSError as exc:
        return b"", None, [Problem(where, "", f"cannot be read: {exc}")]
    doc, problems = read_toml(raw, where)
    return raw, doc, problems
