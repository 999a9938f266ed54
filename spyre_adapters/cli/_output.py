"""Output of the CLI: one data model of tables, rendered as text tables, markdown or JSON.

Data goes to stdout (or to ``-o FILE``), diagnostics to stderr. Text tables (drawn by
``tabulate``) fit the terminal's width, colour the status column on a terminal unless
``NO_COLOR`` is set, and use a fixed width (120 columns) and no colour when stdout is not a
terminal, so output in tests and CI logs is stable. Columns that may fold are wrapped to fit;
the others keep their width. Subcommand modules (built-in or extension) call
:func:`add_output_options` on their parser and :func:`emit` with their JSON document and tables.

``tabulate`` rather than ``rich`` for tables: rich took 130-180 ms to lay out the 50 to 90
rows of ``list`` or ``audit`` (about 2.5 ms a row, with or without folding), a third of the
0.5 s these commands may take; tabulate draws the same table in under a tenth of that.

Output paths are checked when the command line is parsed, before any work: options declared
with ``type=output_file`` (``-o`` is) or ``type=output_directory`` exit 2 naming the path and
what is wrong with it. A result whose file cannot be written after the work anyway is kept
(:func:`keep`: a fallback file, or stdout) and the command exits 4
(:attr:`~spyre_adapters.cli._exitcodes.ExitCode.WRITE_FAILED`) unless it already failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from spyre_adapters._outputs import OutputPathError, Saved, check_directory, check_file, save
from spyre_adapters.tables import TableData

__all__ = [
    "FORMATS",
    "TableData",
    "add_output_options",
    "diagnose",
    "emit",
    "keep",
    "output_directory",
    "render",
    "output_file",
    "unsaved",
]

FORMATS = ("table", "json", "markdown")
_WIDTH = 120
#: status -> SGR parameters (yellow, cyan, green, dim green, dim, bold red)
_STATUS_STYLES = {
    "active": "33",
    "permanent": "36",
    "retirable": "32",
    "retired": "2;32",
    "out-of-range": "2",
    "overdue": "1;31",
    "stale": "33",
    "tampered": "1;31",
}
#: the narrowest a folding column is wrapped to
_MIN_FOLD = 8


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


def _colours(file: TextIO) -> bool:
    return file.isatty() and not os.environ.get("NO_COLOR")


def _width(file: TextIO) -> int:
    return shutil.get_terminal_size((_WIDTH, 24)).columns if file.isatty() else _WIDTH


def _fit(table: TableData, width: int) -> list[int | None]:
    """Per column, the width to wrap it to (``None``: its natural width). Folding columns share
    what the others leave of ``width``: the narrowest keep their natural width when they can,
    the rest share what remains equally."""
    count = len(table.columns)
    natural = [max([len(word) for word in str(column).split()] or [1]) for column in table.columns]
    for row in table.rows:
        for index, cell in enumerate(row[:count]):
            natural[index] = max(
                natural[index], max((len(x) for x in cell.splitlines()), default=0)
            )
    folding = {i for i in range(count) if (i > 0 if table.folding is None else i in table.folding)}
    room = width - (3 * count + 1)  # "│ " + " │ " between cells + " │"
    fixed = sum(w for i, w in enumerate(natural) if i not in folding)
    wanted = sum(natural[i] for i in folding)
    if fixed + wanted <= room or not folding:
        return [None] * count
    budget = max(room - fixed, _MIN_FOLD * len(folding))
    widths: list[int | None] = [None] * count
    left = sorted(folding, key=lambda i: natural[i])  # the narrowest take what they need first
    while left:
        share = budget // len(left)
        index = left.pop(0)
        widths[index] = max(_MIN_FOLD, min(natural[index], share))
        budget -= widths[index] or 0
    return widths


def render(table: TableData, *, width: int = _WIDTH, colour: bool = False) -> str:
    """``table`` as text: its title, the grid, its caption."""
    import tabulate

    rows = [list(row) for row in table.rows]
    if colour and table.status_column is not None:
        for row in rows:
            style = _STATUS_STYLES.get(row[table.status_column])
            if style:
                row[table.status_column] = f"\x1b[{style}m{row[table.status_column]}\x1b[0m"
    widths = _fit(table, width)
    padding = tabulate.MIN_PADDING  # the documented knob: extra room around headers
    tabulate.MIN_PADDING = 0
    try:
        grid = tabulate.tabulate(
            rows,
            headers=list(table.columns),
            tablefmt="simple_outline",
            disable_numparse=True,
            maxcolwidths=widths,
            maxheadercolwidths=[
                len(str(c)) if w is None else w for c, w in zip(table.columns, widths, strict=True)
            ],
        )
    finally:
        tabulate.MIN_PADDING = padding
    parts = [table.title, grid] if table.title else [grid]
    if table.caption:
        parts.append(textwrap.fill(table.caption, width=max(width, 20)))
    return "\n".join(parts) + "\n"


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
    return "\n".join(render(table) for table in tables)


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
    width, colour = _width(sys.stdout), _colours(sys.stdout)
    sys.stdout.write("\n".join(render(t, width=width, colour=colour) for t in tables))


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
