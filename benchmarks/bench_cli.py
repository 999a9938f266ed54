"""Start-up time of ``spyre-adapters`` commands that run no model (target: under 0.5 s each).

Each command runs in a fresh process (as a user or a CI step runs it), round robin with the
reference imports (the interpreter alone, ``import torch``, ``import transformers``,
``import spyre_sim``), so every figure of a run is measured under the same machine load. Prints
the median wall time of each over ``--repeat`` rounds, its ratio to ``import torch`` and
whether the process imported torch or Transformers.

    python benchmarks/bench_cli.py                # 5 rounds
    python benchmarks/bench_cli.py --repeat 9 --json
    python benchmarks/bench_cli.py --no-bytecode  # no bytecode caches written

``list``, ``pin`` and ``check`` keep what parsing the adapters' files gives in the user's parse
cache (``spyre_adapters._user_cache``): they are measured with it warm, as every call after a
user's first runs, and again each time with an empty cache folder of its own, as the first call
after an install runs (it reads the parse results the package ships for its own files, and
writes the user's cache).

The processes run as an installed package runs: with its bytecode caches (pip compiles a
wheel's modules on install), written by a warm-up round when missing, even where the calling
environment sets ``PYTHONDONTWRITEBYTECODE``. ``--no-bytecode`` measures the other case (a
source checkout run with ``PYTHONDONTWRITEBYTECODE``: its modules compiled at every start).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 0.5

# Runs one command in-process and reports whether torch / Transformers got imported.
_RUN = """
import sys
from spyre_adapters.cli import main
try:
    code = main({argv!r})
except SystemExit as exit_:
    code = exit_.code
print("\\nIMPORTED", "torch" in sys.modules, "transformers" in sys.modules, file=sys.stderr)
"""


def commands(lock: Path) -> dict[str, list[str]]:
    """The commands measured (the ones that run no model)."""
    return {
        "--version": ["--version"],
        "--help": ["--help"],
        "stacks": ["stacks"],
        "list": ["list"],
        "show rope-rotation": ["show", "rope-rotation"],
        "audit": ["audit"],
        "pin": ["pin", "--stack", "2026.05", "-o", str(lock)],
        "check": ["check", "--lock", str(lock)],
    }


REFERENCES = {
    "python (no import)": "pass",
    "import torch": "import torch",
    "import transformers": "import transformers",
    "import spyre_sim": "import spyre_sim",
}


_ENV = {**os.environ, "NO_COLOR": "1"}
CACHE_ENV = "SPYRE_ADAPTERS_CACHE_DIR"  # spyre_adapters._user_cache: not imported here


# the commands that parse the adapters' files, measured also as a first call (empty cache)
_UNCACHED = ("list", "pin", "check")
_NO_CACHE = " (first call)"


def _time(code: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**_ENV, **(env or {})},
        check=False,
    )
    return time.perf_counter() - start, done.stderr


_FIRST_CALLS = iter(range(1_000_000))


def _env_of(name: str, tmp: str) -> dict[str, str]:
    """The environment of one call of ``name``: a first call gets a cache folder never used."""
    if name.endswith(_NO_CACHE):
        return {CACHE_ENV: str(Path(tmp) / f"first-{next(_FIRST_CALLS)}")}
    return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="no bytecode caches (PYTHONDONTWRITEBYTECODE)"
    )
    args = parser.parse_args(argv)
    if args.no_bytecode:
        _ENV["PYTHONDONTWRITEBYTECODE"] = "1"  # caches already written are still read
    else:
        _ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        lock = Path(tmp) / "bench.lock"
        # a parse cache of the run's own, filled by the warm-up round as a user's first call
        # fills theirs; the _UNCACHED commands run a second time, each with an empty one
        _ENV[CACHE_ENV] = str(Path(tmp) / "cache")
        runs = {name: _RUN.format(argv=argv) for name, argv in commands(lock).items()}
        for name in _UNCACHED:
            runs[name + _NO_CACHE] = runs[name]
        runs.update(REFERENCES)
        times: dict[str, list[float]] = {name: [] for name in runs}
        imported: dict[str, tuple[bool, bool]] = {}
        _time(runs["pin"])  # the lock `check` reads; also warms the file cache
        for name, code in runs.items():  # writes the bytecode caches an installed package has
            _time(code, _env_of(name, tmp))
        for _ in range(args.repeat):
            for name, code in runs.items():
                seconds, err = _time(code, _env_of(name, tmp))
                times[name].append(seconds)
                for line in err.splitlines():
                    if line.startswith("IMPORTED "):
                        _, has_torch, has_transformers = line.split()
                        imported[name] = (has_torch == "True", has_transformers == "True")
    torch_median = statistics.median(times["import torch"])
    rows = []
    for name in runs:
        median = statistics.median(times[name])
        torch, transformers = imported.get(name, (None, None))
        rows.append(
            {
                "what": name,
                "median_s": round(median, 3),
                "min_s": round(min(times[name]), 3),
                "vs_import_torch": round(median / torch_median, 2),
                "imports_torch": torch,
                "imports_transformers": transformers,
                "under_target": median < TARGET_SECONDS if name not in REFERENCES else None,
            }
        )
    if args.json:
        print(json.dumps({"target_s": TARGET_SECONDS, "repeat": args.repeat, "rows": rows}))
        return 0
    print(f"{'what':22} {'median s':>9} {'min s':>7} {'x torch':>8}  torch  transformers  <0.5s")
    for row in rows:
        flags = [
            "-" if row[k] is None else ("yes" if row[k] else "no")
            for k in ("imports_torch", "imports_transformers", "under_target")
        ]
        print(
            f"{row['what']:22} {row['median_s']:9.3f} {row['min_s']:7.3f} "
            f"{row['vs_import_torch']:8.2f}  {flags[0]:5}  {flags[1]:12}  {flags[2]}"
        )
    caches = "without bytecode caches" if args.no_bytecode else "with bytecode caches"
    print(f"{args.repeat} rounds, each command in a fresh process, round robin, {caches}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
