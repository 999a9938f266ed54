"""``spyre-adapters new NAME --gap G``: write a manifest skeleton for a new adapter.

Writes ``DIR/NAME/0.1.0.toml`` (``--dir``, default ``manifests``) with the gaps, the families it
is meant for, a ``stacks`` range from ``--stack`` (default: the newest built-in release) up to
the first release closing every gap, ``retire_by`` at that release for scaffolding, and a
placeholder entry point. ``kind`` is ``permanent`` when every gap is lasting. Prints the path
(stderr) and the text (stdout). Exit status: 0 written, 2 usage error (unknown gap, file exists
without ``--force``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import diagnose

__all__ = ["add_parser", "run"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "new",
        help="write a manifest skeleton for a new adapter",
        description="Write DIR/NAME/0.1.0.toml: a manifest skeleton for a new adapter bridging "
        "the given gaps.",
    )
    parser.add_argument("name", help="adapter name (lowercase, digits and dashes)")
    parser.add_argument(
        "--gap", action="append", required=True, metavar="G", help="gap id; repeatable"
    )
    parser.add_argument("--family", action="append", default=[], metavar="F", help="model type")
    parser.add_argument("--stack", metavar="R", help="first release (default: the newest)")
    parser.add_argument("--kind", choices=("scaffolding", "permanent"), help="default: by gaps")
    parser.add_argument("--entry-point", metavar="MODULE:OBJECT", help="implementation")
    parser.add_argument("--dir", type=Path, default=Path("manifests"), help="manifest folder")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def run(args: argparse.Namespace) -> int:
    from spyre_adapters.stacks import default_catalogue
    from spyre_adapters.triage import manifest_skeleton

    catalogue = default_catalogue()
    if not _NAME.match(args.name):
        diagnose(
            f"error: adapter name {args.name!r} must be lowercase letters, digits and dashes, "
            "e.g. rope-rotation"
        )
        return ExitCode.USAGE
    unknown = [g for g in args.gap if g not in catalogue.gaps]
    if unknown:
        diagnose(
            f"error: unknown gap ids {', '.join(map(repr, unknown))}; known: "
            + ", ".join(sorted(catalogue.gaps))
        )
        return ExitCode.USAGE
    release = args.stack or catalogue.releases[-1].name
    if release not in [r.name for r in catalogue.releases]:
        diagnose(f"error: unknown release {release!r}")
        return ExitCode.USAGE
    text = manifest_skeleton(
        args.name,
        list(args.gap),
        list(args.family),
        release,
        kind=args.kind,
        entry_point=args.entry_point,
    )
    path = args.dir / args.name / "0.1.0.toml"
    if path.exists() and not args.force:
        diagnose(f"error: {path} exists; pass --force to overwrite it")
        return ExitCode.USAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    diagnose(f"wrote {path}")
    sys.stdout.write(text)
    return ExitCode.OK
