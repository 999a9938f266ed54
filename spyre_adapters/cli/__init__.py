"""The ``spyre-adapters`` command line.

``main(argv) -> int`` runs it; subcommands are dispatched from a table
(:data:`spyre_adapters.cli._main.SUBCOMMANDS`), one module per subcommand.

Extension contract (for subcommands developed separately): for the names ``triage``, ``sweep``
and ``new``, the CLI imports ``spyre_adapters.cli._<name>`` when it builds its parser (at each
``main`` call, never at package import). When that module does not exist the subcommand is
simply absent. When it exists it must expose:

- ``add_parser(subparsers) -> None``: add one subparser named ``<name>`` to the
  ``argparse`` subparsers object (use ``spyre_adapters.cli._output.add_output_options`` for
  ``--format``/``-o``);
- ``run(args: argparse.Namespace) -> int``: do the work and return an
  :class:`ExitCode` value. Data goes to stdout through ``spyre_adapters.cli._output.emit``,
  diagnostics to stderr (``diagnose``); the registry chosen by the global options is
  ``spyre_adapters.cli._context.registry_for(args)``. Errors derived from
  ``SpyreAdaptersError`` / ``SpyreSimError`` may propagate: ``main`` prints them and exits 3
  (2 for unknown releases or adapters).

Output paths: declare every option naming a file or folder to write with
``type=spyre_adapters.cli._output.output_file`` (or ``output_directory``), so a path that
cannot be written is a usage error (exit 2) before any work, and write results with
``spyre_adapters.cli._output.keep``, which keeps a result whose file fails after the work
(fallback file or stdout) and makes ``main`` exit 4 unless the command failed otherwise.

Import cost: the parser imports every subcommand module at each ``main`` call, so a module
imports torch, Transformers or :mod:`spyre_sim` only inside ``run`` (``--version`` and
``--help`` import none of them).

``audit --verify`` imports :mod:`spyre_adapters.enablement.verify` only when asked (it builds models);
see :mod:`spyre_adapters.cli._audit` for the verdicts it reports.
"""

from __future__ import annotations

from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._main import main

__all__ = ["ExitCode", "main"]
