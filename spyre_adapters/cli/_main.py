"""The ``spyre-adapters`` entry point: the parser, the subcommand table and error handling."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from spyre_adapters.cli._context import add_global_options
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import diagnose, unsaved
from spyre_adapters.errors import (
    SpyreAdaptersError,
    UnknownAdapterError,
    UnknownReleaseError,
)

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

#: Subcommand name -> whether it ships with this package. Each is the module
#: ``spyre_adapters.cli._<name>`` with ``add_parser(subparsers)`` and ``run(args) -> int``;
#: an optional one whose module does not exist is simply absent.
SUBCOMMANDS: dict[str, bool] = {
    "stacks": True,
    "list": True,
    "show": True,
    "audit": True,
    "pin": True,
    "check": True,
    "triage": False,
    "bridge": False,
    "sweep": False,
    "new": False,
}


def _module(name: str, required: bool) -> ModuleType | None:
    module_name = f"spyre_adapters.cli._{name}"
    if not required and importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


def _version() -> str:
    try:
        return importlib.metadata.version("spyre-adapters")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every available subcommand (extension modules imported here), or with
    the subcommand ``only`` alone (``""``: none), so that a run imports one subcommand's
    module and what it needs, not every command's."""
    parser = argparse.ArgumentParser(
        prog="spyre-adapters",
        description="Versioned Spyre adapters: manifests, lifecycle per stack release, pins.",
        epilog=ExitCode.help_text()
        + "\n\nenvironment:\n  SPYRE_ADAPTERS_DISABLE=a,b  skip the named adapter plugins "
        "(e.g. builtin)\n  NO_COLOR=1                   no colour in tables",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    add_global_options(parser)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name, required in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        module = _module(name, required)
        if module is None:
            continue
        module.add_parser(subparsers)
        subparsers.choices[name].set_defaults(_run=module.run)
    return parser


def _exit_code_of(error: Exception) -> ExitCode:
    if isinstance(error, (UnknownReleaseError, UnknownAdapterError)):
        return ExitCode.USAGE
    return ExitCode.INVALID


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (``""`` for a bare ``--version``), or ``None`` when it
    names none that is known: then every subcommand is built, for ``--help`` and for
    argparse's list of choices."""
    tokens = iter(argv)
    for token in tokens:
        if token == "--manifests":  # the one global option with a value
            next(tokens, None)
        elif token in ("-h", "--help"):
            return None
        elif token == "--version":
            return ""
        elif not token.startswith("-"):
            return token if token in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``spyre-adapters`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        code = exit_.code
        return code if isinstance(code, int) else ExitCode.OK if code is None else ExitCode.USAGE
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_usage(sys.stderr)
        diagnose("error: a command is required (see --help)")
        return ExitCode.USAGE
    try:
        code = int(run(args))
    except Exception as error:
        if not isinstance(error, SpyreAdaptersError) and not _is_sim_error(error):
            raise
        diagnose(f"error: {error}")
        return _exit_code_of(error)
    if code == ExitCode.OK and unsaved(args):
        return ExitCode.WRITE_FAILED
    return code


def _is_sim_error(error: Exception) -> bool:
    """Whether ``error`` is a ``SpyreSimError``, without importing :mod:`spyre_sim` (and torch)
    for commands that never did: one can only have been raised once its module is loaded."""
    errors = sys.modules.get("spyre_sim.errors")
    return errors is not None and isinstance(error, errors.SpyreSimError)
