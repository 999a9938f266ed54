"""Reading the values of one catalogue TOML file, every problem collected.

:class:`_Reader` is what the two file readers share (:mod:`spyre_sim.catalogue._gaps_file`
for ``gaps.toml``, :mod:`spyre_sim.catalogue._release_file` for a release delta): it parses the
TOML, checks the schema version, unknown keys and the type of each value (strings, tables,
dates, evidence sources), and collects every problem with its key path instead of stopping at
the first. Problems are :class:`~spyre_sim.problems.Problem` values, each quoting the value as
it is written in TOML (:func:`_show`); cross-file checks (bases, gap references, merging) are
:mod:`spyre_sim.catalogue._loading`'s.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from spyre_sim.catalogue._model import SCHEMA_VERSION, SCHEMA_VERSIONS
from spyre_sim.problems import Problem, read_toml

_SOURCE = re.compile(
    r"^(?:(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[0-9]+|docs/[A-Za-z0-9_./-]+\.md §[0-9]+(?:\.[0-9]+)*)$"
)


_SOURCE_FORMS = (
    'a source is "#1234" (a torch-spyre PR or issue), "owner/repo#12" (another repository) '
    'or "docs/STACK.md §5" (a section of this project\'s stack description)'
)


_OP_KEY = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def _show(value: object) -> str:
    """A value as it would be written in TOML (strings double-quoted)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_show(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, _dt.date):
        return value.isoformat()
    return repr(value)


class _Reader:
    """The checks of one file's values, collecting problems instead of stopping at the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.version = SCHEMA_VERSION

    def problem(self, key: str, what: str, got: object) -> None:
        self.problems.append(Problem(self.source, key, f"{what} (got {_show(got)})"))

    def _toml(self, raw: bytes) -> dict[str, Any] | None:
        doc, problems = read_toml(raw, self.source)
        self.problems.extend(problems)
        return doc

    def _schema(self, doc: Mapping[str, Any], versions: Iterable[int] = SCHEMA_VERSIONS) -> int:
        """The file's schema version (the newest one when it is missing or unsupported, so
        that the rest of the file is still checked)."""
        allowed = tuple(versions)
        version = doc.get("schema_version")
        if "schema_version" not in doc:
            self.problems.append(
                Problem(
                    self.source,
                    "schema_version",
                    f"missing; write schema_version = {allowed[-1]} (got nothing)",
                )
            )
        elif type(version) is not int or version not in allowed:
            self.problem(
                "schema_version",
                "unsupported schema version; this loader reads "
                + " and ".join(str(v) for v in allowed),
                version,
            )
        else:
            return version
        return allowed[-1]

    def _sources(self, key: str, value: object) -> tuple[str, ...]:
        """A ``source`` value: one reference or a list of them, each in a known form."""
        items = value if isinstance(value, list) else [value]
        if not items or not isinstance(value, (str, list)):
            self.problem(key, f"must be a string or a list of strings; {_SOURCE_FORMS}", value)
            return ()
        found: list[str] = []
        for item in items:
            if not isinstance(item, str) or not _SOURCE.match(item):
                self.problem(key, f"not a source; {_SOURCE_FORMS}", item)
            else:
                found.append(item)
        return tuple(found)

    def _day(self, key: str, value: object, *, required: bool = True) -> _dt.date | None:
        if value is None:
            if required:
                self.problems.append(Problem(self.source, f"{key}", "missing (got nothing)"))
            return None
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date | str):
            self.problem(key, "must be a date such as 2026-05-29", value)
            return None
        if isinstance(value, str):
            try:
                return _dt.date.fromisoformat(value)
            except ValueError:
                self.problem(key, "not a date; write YYYY-MM-DD", value)
                return None
        return value

    def _unknown_keys(self, prefix: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
        for key in table:
            if key not in allowed:
                where = f"{prefix}.{key}" if prefix else key
                self.problem(
                    where, f"unknown key; allowed: {', '.join(sorted(allowed))}", table[key]
                )

    def _string(self, key: str, value: object, *, required: bool = True) -> str | None:
        if value is None:
            if required:
                self.problems.append(Problem(self.source, f"{key}", "missing (got nothing)"))
            return None
        if not isinstance(value, str):
            self.problem(key, "must be a string", value)
            return None
        if required and not value.strip():
            self.problem(key, "must not be empty", value)
            return None
        return value

    def _table(self, key: str, value: object) -> Mapping[str, Any] | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(key, "must be a table", value)
            return None
        return value
