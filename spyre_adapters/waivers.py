"""Waivers: permission to keep an overdue adapter, with a reason and an expiry date.

A waivers file is TOML::

    schema_version = 1

    [[waiver]]
    adapter = "rms-norm-fp16"        # adapter name (required)
    versions = "<2.0"                # optional specifier over the adapter's versions (default: all)
    reason = "stack 2026.09 RMSNorm still drifts on gemma; upstream issue 412"   # required
    expires = 2026-12-31             # TOML date (required); the waiver holds up to that day

A waiver holds on ``today <= expires``; afterwards the adapter is overdue again. ``today`` is
always passed explicitly to the lifecycle (the CLI uses the wall clock, or ``--today``).
:func:`check_waivers` rejects waivers about adapters (or versions) that are not installed, so
a misspelt name cannot silently waive nothing.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from spyre_adapters.errors import Problem, WaiverError
from spyre_sim.problems import read_toml_file

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass

__all__ = [
    "WAIVERS_SCHEMA_VERSION",
    "Waiver",
    "check_waivers",
    "find_waiver",
    "load_waivers",
    "parse_waivers",
]

WAIVERS_SCHEMA_VERSION = 1
_KEYS = ("adapter", "versions", "reason", "expires")


@dataclass(frozen=True)
class Waiver:
    """Keep ``adapter`` (versions matching ``versions``) past its ``retire_by`` until
    ``expires`` (inclusive), because of ``reason``."""

    adapter: str
    reason: str
    expires: _dt.date
    versions: SpecifierSet = field(default_factory=SpecifierSet)
    #: the file and the table the waiver was read from (for messages; not compared)
    where: str = field(default="", compare=False)
    key: str = field(default="", compare=False)

    def covers(self, name: str, version: Version) -> bool:
        """Whether this waiver is about adapter ``name`` at ``version``."""
        return name == self.adapter and self.versions.contains(version, prereleases=True)

    def valid_on(self, today: _dt.date) -> bool:
        """Whether the waiver still holds on ``today``."""
        return today <= self.expires


def find_waiver(waivers: Iterable[Waiver], name: str, version: Version) -> Waiver | None:
    """The waiver for ``name`` at ``version`` that expires last, or ``None``."""
    matching = [w for w in waivers if w.covers(name, version)]
    return max(matching, key=lambda w: w.expires) if matching else None


def load_waivers(path: Path | str) -> list[Waiver]:
    """Read a waivers file; raise :class:`WaiverError` listing every problem."""
    where = str(path)
    _, data, problems = read_toml_file(Path(path), where)
    if data is None:
        raise WaiverError(problems)
    return parse_waivers(data, where=where)


def parse_waivers(data: Mapping[str, Any], *, where: str) -> list[Waiver]:
    """Validate a parsed waivers document (see the module docstring)."""
    problems: list[Problem] = []
    for key in data:
        if key not in ("schema_version", "waiver"):
            problems.append(Problem(where, key, "unknown key (expected schema_version, waiver)"))
    schema = data.get("schema_version")
    if schema != WAIVERS_SCHEMA_VERSION:
        problems.append(
            Problem(
                where,
                "schema_version",
                f"expected {WAIVERS_SCHEMA_VERSION}, got {schema!r}",
            )
        )
    entries = data.get("waiver", [])
    if not isinstance(entries, list):
        problems.append(Problem(where, "waiver", "expected an array of tables ([[waiver]])"))
        entries = []
    waivers: list[Waiver] = []
    for index, entry in enumerate(entries):
        key = f"waiver[{index}]"
        if not isinstance(entry, dict):
            problems.append(Problem(where, key, "expected a table"))
            continue
        found: list[Problem] = []
        for unknown in entry:
            if unknown not in _KEYS:
                found.append(
                    Problem(where, f"{key}.{unknown}", f"unknown key (expected {', '.join(_KEYS)})")
                )
        adapter = entry.get("adapter")
        if not isinstance(adapter, str) or not adapter:
            found.append(
                Problem(where, f"{key}.adapter", f"expected an adapter name, got {adapter!r}")
            )
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            found.append(
                Problem(
                    where, f"{key}.reason", f"a waiver needs a non-empty reason, got {reason!r}"
                )
            )
        expires = entry.get("expires")
        if isinstance(expires, _dt.datetime) or not isinstance(expires, _dt.date):
            found.append(
                Problem(
                    where,
                    f"{key}.expires",
                    f"expected a TOML date such as 2026-12-31, got {expires!r}",
                )
            )
        versions = SpecifierSet()
        text = entry.get("versions", "")
        try:
            if not isinstance(text, str):
                raise InvalidSpecifier(repr(text))
            versions = SpecifierSet(text)
        except InvalidSpecifier:
            found.append(Problem(where, f"{key}.versions", f"{text!r} is not a version specifier"))
        problems.extend(found)
        if not found:
            assert isinstance(adapter, str)
            assert isinstance(reason, str)
            assert isinstance(expires, _dt.date)
            waivers.append(Waiver(adapter, reason, expires, versions, where, key))
    if problems:
        raise WaiverError(problems)
    return waivers


def check_waivers(waivers: Iterable[Waiver], registry: Registry) -> None:
    """Raise :class:`WaiverError` naming file and key for every waiver about an adapter that
    is not installed, or whose ``versions`` match no installed version of it."""
    problems: list[Problem] = []
    names = registry.names()
    for waiver in waivers:
        where, key = waiver.where or "waivers", waiver.key or "waiver"
        installed = registry.versions(waiver.adapter)
        if not installed:
            close = difflib.get_close_matches(waiver.adapter, names, n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else f"installed: {', '.join(names) or 'none'}"
            )
            problems.append(
                Problem(
                    where,
                    f"{key}.adapter",
                    f"no adapter {waiver.adapter!r} is installed ({hint}); a waiver for it "
                    f"would waive nothing",
                )
            )
            continue
        if not any(waiver.versions.contains(m.version, prereleases=True) for m in installed):
            listed = ", ".join(str(m.version) for m in installed)
            problems.append(
                Problem(
                    where,
                    f"{key}.versions",
                    f"{str(waiver.versions)!r} matches no installed version of "
                    f"{waiver.adapter} (installed: {listed})",
                )
            )
    if problems:
        raise WaiverError(problems)
