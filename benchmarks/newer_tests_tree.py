"""A test tree with the common tests of a newer Transformers release than the shared tree's.

The shared copy of Transformers' tests (``../shared/transformers-tests``) matches
``transformers==5.15.1``. A user on a later 5.x runs that release's tests, and their common
mixins (``tests/test_modeling_common.py`` and its siblings) change from release to release:
5.25 adds 15 tests to ``ModelTesterMixin`` (``test_bc_cache_name_forward``,
``test_model_rope_with_partial_rotation``, ``test_can_capture_specific_layers_hidden_states``,
...). Transformers' source distribution on the package index ships those top-level
``tests/*.py`` files, though not ``tests/models/``. This script builds, outside the checkout,
a copy of the shared tree with a newer sdist's top-level test files laid over it, so that
``bench_conformance.py --tree OUT --python <venv with that release>`` measures the device
against the newer release's model code and common tests, with the shared tree's per-family
files::

    pip download transformers==5.25.0 --no-binary :all: --no-deps -d /tmp/sdist
    python benchmarks/newer_tests_tree.py --sdist /tmp/sdist/transformers-5.25.0.tar.gz \\
        --python .venv-525/bin/python --out /tmp/tree-525
    python benchmarks/bench_conformance.py --python .venv-525/bin/python --tree /tmp/tree-525 \\
        --families "$(cat /tmp/tree-525/families.txt)" --selection fast

Per-family files written for 5.15.1 can fail under the newer release whatever the device (the
bench counts only the tests that pass on the CPU, so those drop out); some do not even collect
(the decoders' shared ``tests/causal_lm_tester.py`` imports names a later ``testing_utils``
no longer has). With ``--python`` every family file is collected once with that interpreter;
``families.txt`` lists the families whose file collects and the rest are named with their
error. ``requirements.txt`` in OUT pins the sdist's release. ``--out`` must not exist: nothing
is overwritten, and the tree appears whole or not at all.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tarfile
from pathlib import Path

from derived_tree import build_beside, refused, uncollected

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TREE = ROOT.parent / "shared" / "transformers-tests"

#: sdist members laid over the tree: ``transformers-<version>/tests/<name>.py``, top level only
_MEMBER = re.compile(r"^transformers-(?P<version>[^/]+)/tests/(?P<name>[A-Za-z0-9_]+\.py)$")
_TEST = re.compile(r"^    def (test_[A-Za-z0-9_]+)\(", re.MULTILINE)


def sdist_tests(sdist: Path) -> tuple[str, dict[str, bytes]]:
    """The release of a Transformers sdist and its top-level ``tests/*.py`` files by name.
    Members are read, never extracted, so no path in the archive reaches the file system."""
    version = None
    files: dict[str, bytes] = {}
    with tarfile.open(sdist, "r:*") as archive:
        for member in archive.getmembers():
            found = _MEMBER.match(member.name)
            if found is None or not member.isfile():
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            version = found["version"]
            files[found["name"]] = handle.read()
    if version is None:
        raise ValueError(
            f"{sdist} holds no transformers-<version>/tests/*.py: give the source distribution "
            "of transformers (pip download transformers==X --no-binary :all: --no-deps)"
        )
    return version, files


def new_tests(old: str, new: str) -> list[str]:
    """Test method names in ``new`` that ``old`` lacks (both a test module's source)."""
    return sorted(set(_TEST.findall(new)) - set(_TEST.findall(old)))


def _families(tree: Path) -> list[str]:
    models = tree / "tests" / "models"
    return sorted(d.name for d in models.iterdir() if (d / f"test_modeling_{d.name}.py").is_file())


def _build(staging: Path, args: argparse.Namespace, version: str, files: dict[str, bytes]) -> str:
    """Fill ``staging``; return the report's lines."""
    source = args.tree / "tree"
    shutil.copytree(source, staging / "tree")
    for name in ("run", "LICENSE"):
        if (args.tree / name).is_file():
            shutil.copy2(args.tree / name, staging / name)
    requirements = args.tree / "requirements.txt"
    if requirements.is_file():
        pinned = re.sub(
            r"(?m)^transformers==\S+", f"transformers=={version}", requirements.read_text()
        )
        (staging / "requirements.txt").write_text(pinned)
    lines = [f"common tests of transformers {version} laid over {source}:"]
    tests = staging / "tree" / "tests"
    for name, data in sorted(files.items()):
        target = tests / name
        if target.is_file():
            old = target.read_bytes()
            if old == data:
                continue
            added = new_tests(*(b.decode("utf-8", errors="replace") for b in (old, data)))
            more = f": {len(added)} new tests ({', '.join(added)})" if added else ""
            lines.append(f"  changed tests/{name}{more}")
        else:
            lines.append(f"  new tests/{name}")
        target.write_bytes(data)
    families = _families(staging / "tree")
    if args.python:
        failed = uncollected(staging / "run", args.python, families)
        kept = [f for f in families if f not in failed]
        lines.append(f"{len(kept)} of {len(families)} family files collect with {args.python}")
        for family, reason in failed.items():
            lines.append(f"  not collected: {family}: {reason}")
    else:
        kept = families
        lines.append(f"{len(families)} family files (not collected: no --python)")
    (staging / "families.txt").write_text(",".join(kept) + "\n")
    report = "\n".join(lines) + "\n"
    (staging / "OVERLAY.txt").write_text(
        "Generated by spyre-adapters' benchmarks/newer_tests_tree.py: not upstream's tree.\n"
        + report
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, required=True,
                        help="a transformers source distribution (.tar.gz)")  # fmt: skip
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE,
                        help="the shared test tree (with tree/ and run)")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="new directory to build")
    parser.add_argument("--python", default="",
                        help="interpreter of a venv with the sdist's transformers release: "
                        "collect every family file with it")  # fmt: skip
    args = parser.parse_args(argv)
    if refused("newer_tests_tree", args.tree, args.out):
        return 2
    try:
        version, files = sdist_tests(args.sdist)
    except (OSError, tarfile.TarError, ValueError) as error:
        print(f"newer_tests_tree: cannot read --sdist {args.sdist}: {error}", file=sys.stderr)
        return 2
    report = build_beside(args.out, lambda staging: _build(staging, args, version, files))
    print(report, end="")
    print(f"{args.out}: families to measure in {args.out / 'families.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
