"""Tables as data: what a command reports, before it is rendered.

A :class:`TableData` is a title, column names and rows of strings. The library builds them
(e.g. :func:`spyre_adapters.enablement.sweep.report_tables`); the CLI renders them as rich
tables, markdown or JSON (``spyre_adapters.cli``), so the library never imports the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["TableData"]


@dataclass
class TableData:
    """A table: title, column names, rows of strings; ``status_column`` is coloured."""

    title: str
    columns: Sequence[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    status_column: int | None = None
    #: columns that may fold to fit the width (default: every column but the first)
    folding: frozenset[int] | None = None
