"""``spyre-adapters new NAME --gap G [--out DIR]``: a new third-party adapter package.

Creates DIR (default ``./NAME``) holding an installable package that registers the adapter
the way the built-ins do: ``pyproject.toml`` with the ``spyre_adapters`` entry point, the
manifest at ``src/PACKAGE/manifests/NAME/0.1.0.toml`` registered by the package's plugin hook,
an implementation that declines every model until it is written, and a CPU-equivalence test
(layout in :mod:`spyre_adapters.enablement.skeletons`). ``pip install ./DIR`` installs it as is and
``spyre-adapters list`` lists it; nothing else changes until ``matches()`` is written.

The manifest has the gaps, the families it is meant for, a ``stacks`` range from ``--stack``
(default: the newest built-in release) up to the first release closing every gap, and
``retire_by`` at that release for scaffolding; ``kind`` is ``permanent`` when every gap is
lasting. PACKAGE is ``spyre_adapter_<NAME>`` (dashes as underscores) unless ``--package``.

Refused before anything is written (exit 2): an invalid name, an unknown gap or release, an
adapter name already registered, a DIR that exists and is not empty, a DIR inside the
built-in manifests or a ``--manifests`` folder (a package there would be read as manifests),
a DIR that cannot be created. The package is assembled in a temporary folder beside DIR and
renamed into place, so it is never left half-written (exit 4 if writing fails anyway).
Prints the files written (stdout) and the next steps (stderr).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from spyre_adapters._outputs import OutputPathError, check_new_directory, write_tree
from spyre_adapters.cli._context import registry_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import diagnose

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "new",
        help="create a third-party adapter package (manifest, stub, test) in a new directory",
        description="Create DIR (default ./NAME): an installable adapter package with the "
        "spyre_adapters entry point, the manifest, an implementation that declines every model "
        "until written, and a CPU-equivalence test. `pip install ./DIR` installs it as is.",
    )
    parser.add_argument("name", help="adapter name (lower-case letters, digits, single dashes)")
    parser.add_argument(
        "--gap", action="append", required=True, metavar="G", help="gap id; repeatable"
    )
    parser.add_argument(
        "--family", action="append", default=[], metavar="F", help="model type; repeatable"
    )
    parser.add_argument("--stack", metavar="R", help="first release (default: the newest)")
    parser.add_argument("--kind", choices=("scaffolding", "permanent"), help="default: by gaps")
    parser.add_argument("--summary", metavar="TEXT", help="one line: what the adapter changes")
    parser.add_argument(
        "--package", metavar="NAME", help="import package (default: spyre_adapter_<NAME>)"
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="directory to create (default: ./NAME)"
    )


def _manifest_roots(args: argparse.Namespace) -> list[Path]:
    """The built-in manifests folder(s) and every ``--manifests`` folder, resolved."""
    roots = [Path(d) for d in getattr(args, "manifests", [])]
    spec = importlib.util.find_spec("spyre_adapters.manifests")
    if spec is not None and spec.submodule_search_locations:
        roots.extend(Path(p) for p in spec.submodule_search_locations)
    return [r.resolve() for r in roots]


def _refusal(target: Path, args: argparse.Namespace) -> str | None:
    """Why the package may not be created at ``target`` (``None`` when it may)."""
    resolved = target.resolve()
    for root in _manifest_roots(args):
        if resolved == root or root in resolved.parents:
            return (
                f"{target} is inside the manifests folder {root}: every TOML file there is read "
                "as a manifest; create the package elsewhere (e.g. --out ../NAME) and install it"
            )
    try:
        check_new_directory(target)
    except OutputPathError as error:
        return f"{error} with --out (`new` never writes over files)"
    return None


def _requirement() -> str:
    try:
        return f"spyre-adapters>={importlib.metadata.version('spyre-adapters')}"
    except importlib.metadata.PackageNotFoundError:
        return "spyre-adapters"


def run(args: argparse.Namespace) -> int:
    from spyre_adapters.enablement.skeletons import AdapterPackage, manifest_skeleton, package_files
    from spyre_adapters.manifest import parse_manifest

    registry = registry_for(args)
    catalogue = registry.catalogue
    unknown = [g for g in args.gap if g not in catalogue.gaps]
    if unknown:
        diagnose(
            f"error: unknown gap ids {', '.join(map(repr, unknown))}; known: "
            + ", ".join(sorted(catalogue.gaps))
        )
        return ExitCode.USAGE
    release = args.stack or catalogue.releases[-1].name
    if release not in [r.name for r in catalogue.releases]:
        diagnose(
            f"error: unknown release {release!r}; known: "
            + ", ".join(r.name for r in catalogue.releases)
        )
        return ExitCode.USAGE
    spec = AdapterPackage(
        name=args.name,
        gaps=tuple(args.gap),
        families=tuple(args.family),
        release=release,
        package=args.package or AdapterPackage.default_package(args.name),
        kind=args.kind,
        summary=args.summary,
        requires=_requirement(),
    )
    manifest = manifest_skeleton(
        spec.name,
        spec.gaps,
        spec.families,
        release,
        kind=spec.kind,
        entry_point=spec.entry_point,
        summary=spec.summary,
    )
    where = f"{spec.name}/0.1.0.toml"
    _, found = parse_manifest(
        tomllib.loads(manifest), where=where, catalogue=catalogue, check_entry_point=False
    )
    problems = [*map(str, found), *spec.problems()]
    if spec.name in registry:
        sources = sorted({registry.source_of(m) for m in registry.versions(spec.name)})
        problems.append(
            f"adapter {spec.name!r} is already registered ({'; '.join(sources)}); choose another name"
        )
    if args.package and importlib.util.find_spec(spec.package) is not None:
        problems.append(f"a module named {spec.package!r} is already importable; choose another")
    target: Path = args.out if args.out is not None else Path(spec.name)
    refusal = _refusal(target, args)
    if refusal is not None:
        problems.append(refusal)
    if problems:
        for problem in problems:
            diagnose(f"error: {problem}")
        return ExitCode.USAGE
    files = package_files(spec, manifest)
    try:
        write_tree(target, files)
    except OSError as error:
        diagnose(f"error: could not create {target} ({error}); nothing was left behind")
        return ExitCode.WRITE_FAILED
    for relative in files:
        sys.stdout.write(f"{target / relative}\n")
    diagnose(
        f"created {target}: adapter {spec.name} in package {spec.package}; it declines every "
        f"model until matches() and apply() are written in "
        f"{target / 'src' / spec.package / 'adapter.py'}; then `pip install -e {target}` and "
        f"`spyre-adapters list`"
    )
    return ExitCode.OK
