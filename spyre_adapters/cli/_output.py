"""Output of the CLI: one data model of tables, rendered as rich tables, markdown or JSON.

Data goes to stdout (or to ``-o FILE``), diagnostics to stderr. Rich tables honour ``NO_COLOR``
and use a fixed width (120 columns) and no colour when stdout is not a terminal, so output in
tests and CI logs is stable. Subcommand modules (built-in or extension) call
:func:`add_output_options` on their parser and :func:`emit` with their JSON document and tables.

Output paths are checked when the command line is parsed, before any work: options declared
with ``type=output_file`` (``-o`` is) or ``type=output_directory`` exit 2 naming the path and
what is wrong with it. A result whose file cannot be written after the work anyway is kept
(:func:`keep`: a fallback file, or stdout) and the command exits 4
(:attr:`~spyre_adapters.cli._exitcodes.ExitCode.WRITE_FAILED`) unless it already failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from spyre_adapters._outputs import OutputPathError, Saved, check_directory, check_file, save
from spyre_adapters.tables import TableData

__all__ = [
    "FORMATS",
    "TableData",
    "add_output_options",
    "diagnose",
    "emit",
    "keep",
    "make_console",
    "output_directory",
    "output_file",
    "unsaved",
]

FORMATS = ("table", "json", "markdown")
_WIDTH = 120
_STATUS_STYLES = {
    "active": "yellow",
    "permanent": "cyan",
    "retirable": "green",
    "retired": "dim green",
    "out-of-range": "dim",
    "overdue": "bold red",
    "stale": "yellow",
    "tampered": "bold red",
}


def output_file(text: str) -> Path:
    """An ``argparse`` type: a file path that can be written (checked at parse time)."""
    try:
        return check_file(text)
    except OutputPathError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def output_directory(text: str) -> Path:
    """An ``argparse`` type: a directory that exists or can be created, and is writable."""
    try:
        return check_directory(text)
    except OutputPathError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--format table|json|markdown`` and ``-o/--output FILE`` (checked at parse time)."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table for people (default), json for machines (documented schema), markdown",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=output_file,
        help="write the data to FILE instead of stdout",
    )


def make_console(file: TextIO) -> Console:
    """A console on ``file``: colour only on a terminal and without ``NO_COLOR``; fixed width
    when not a terminal."""
    tty = file.isatty()
    return Console(
        file=file,
        width=None if tty else _WIDTH,
        color_system="auto" if tty else None,
        no_color=bool(os.environ.get("NO_COLOR")),
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


def _rich(table: TableData) -> Table:
    rich_table = Table(title=table.title, caption=table.caption or None, title_justify="left")
    for index, column in enumerate(table.columns):
        folds = index > 0 if table.folding is None else index in table.folding
        rich_table.add_column(
            column,
            overflow="fold",
            no_wrap=not folds,
            ratio=(2 if index == len(table.columns) - 1 else 1) if folds else None,
        )
    for row in table.rows:
        cells: list[Text | str] = list(row)
        if table.status_column is not None:
            value = row[table.status_column]
            cells[table.status_column] = Text(value, style=_STATUS_STYLES.get(value, ""))
        rich_table.add_row(*cells)
    return rich_table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(tables: Sequence[TableData]) -> str:
    parts = []
    for table in tables:
        lines = [f"### {table.title}", ""]
        lines.append("| " + " | ".join(_cell(c) for c in table.columns) + " |")
        lines.append("|" + "|".join("---" for _ in table.columns) + "|")
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
        if table.caption:
            lines += ["", table.caption]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _plain(tables: Sequence[TableData]) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=_WIDTH, color_system=None, highlight=False, emoji=False)
    for table in tables:
        console.print(_rich(table))
    return buffer.getvalue()


def emit(args: argparse.Namespace, document: dict[str, Any], tables: Sequence[TableData]) -> None:
    """Write the data in the format asked for, to ``-o FILE`` or stdout."""
    fmt = getattr(args, "format", "table")
    output = getattr(args, "output", None)
    if fmt == "json":
        text: str | None = json.dumps(document, indent=2) + "\n"
    elif fmt == "markdown":
        text = _markdown(tables)
    else:
        text = None
    if output:
        text = text if text is not None else _plain(tables)
        if keep(args, Path(output), text, "the output") is not None:
            return
    if text is not None:
        sys.stdout.write(text)
        return
    console = make_console(sys.stdout)
    for table in tables:
        console.print(_rich(table))


def keep(args: argparse.Namespace, path: Path, text: str, what: str) -> Path | None:
    """Write ``text`` to ``path``, or keep it when that fails: in a fallback file, else on
    stdout (when ``None`` is returned the caller prints it; :func:`emit` does). Says where on
    stderr; a failure is recorded on ``args`` (see :func:`unsaved`)."""
    saved = save(path, text)
    diagnose(saved.message(what))
    if not saved.ok:
        args._unsaved = [*unsaved(args), saved]
    return saved.path


def unsaved(args: argparse.Namespace) -> list[Saved]:
    """The outputs of this run that could not be written where asked."""
    value = getattr(args, "_unsaved", None)
    return list(value) if isinstance(value, list) else []


def diagnose(message: str) -> None:
    """A diagnostic line on stderr."""
    print(f"spyre-adapters: {message}", file=sys.stderr)
