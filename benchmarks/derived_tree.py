"""What the scripts that build a test tree from the shared one have in common.

``held_out_tree.py`` (families the shared tree lacks) and ``newer_tests_tree.py`` (a newer
Transformers release's common tests) each build a copy of the shared Transformers test tree
outside the checkout. Both refuse a tree without tests or a ``run`` script and an ``--out`` that
exists (nothing is overwritten), build beside ``--out`` under a fresh name and rename it, so the
tree appears whole or not at all, and collect their test files once with the tree's runner.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def refused(tool: str, tree: Path, out: Path) -> bool:
    """Whether ``tree`` is not a shared test tree or ``out`` exists (said on stderr)."""
    if not (tree / "tree" / "tests" / "models").is_dir() or not (tree / "run").is_file():
        print(f"{tool}: {tree} has no tree/tests/models or run script; give --tree the shared "
              "transformers-tests directory", file=sys.stderr)  # fmt: skip
        return True
    if out.exists():
        print(f"{tool}: --out {out} exists; give a new path (nothing is overwritten)",
              file=sys.stderr)  # fmt: skip
        return True
    return False


def build_beside(out: Path, fill: Callable[[Path], T]) -> T:
    """``fill`` a fresh directory beside ``out``, then rename it to ``out``; on any failure the
    directory is removed and no directory of the user's is reused or removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        result = fill(staging)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def uncollected(run: Path, python: str, families: list[str]) -> dict[str, str]:
    """Collect the family files of the tree ``run`` belongs to in one pytest run (its copy in a
    scratch cache, removed after); ``family -> reason`` for each file that yields no test (the
    first error line of its collection error, or that nothing was collected)."""
    paths = [f"tests/models/{f}/test_modeling_{f}.py" for f in families]
    cache = run.parent / ".collect-cache"
    env = {**os.environ, "PYTHON": python, "TT_CACHE": str(cache)}
    try:
        done = subprocess.run(
            [str(run), *paths, "--collect-only", "-q", "--continue-on-collection-errors"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    output = done.stdout + done.stderr
    failed: dict[str, str] = {}
    for family, path in zip(families, paths, strict=True):
        if f"{path}::" in output:
            continue
        block = output.partition(f"ERROR collecting {path}")[2]
        errors = [ln for ln in block.splitlines() if ln.startswith("E ")]
        failed[family] = (errors[0][2:].strip() if errors else "no test collected")[:160]
    return failed
