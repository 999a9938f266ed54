"""Overhead of ``pytest --spyre``: run the ``examples/`` suite on the host and on the emulated
device (numerics on, newest release), in one go, and print the time ratio.

Two numbers per run: wall time of the whole ``pytest`` process (what a user waits for,
interpreter start and imports included) and the time pytest spent in the tests (the
``time`` attribute of the JUnit XML). Target: device/host < 3x.

    python benchmarks/bench_plugin.py [--repeat N] [--stack R] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(extra: list[str], junit: Path) -> tuple[float, float, str]:
    cmd = [sys.executable, "-m", "pytest", str(EXAMPLES), "-q", "-p", "no:cacheprovider",
           f"--junitxml={junit}", *extra]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ))
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"pytest exited {done.returncode}: {' '.join(cmd)}")
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")  # type: ignore[assignment]
    assert suite is not None
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return wall, float(suite.get("time", "0")), tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind (best kept)")
    parser.add_argument("--stack", default=None, help="stack release for the device run")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments for both runs")
    args = parser.parse_args(argv)
    device_args = ["--spyre", "--spyre-numerics=on"]
    if args.stack:
        device_args.append(f"--spyre-stack={args.stack}")
    best: dict[str, tuple[float, float, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        for _ in range(args.repeat):
            for name, extra in (("host", []), ("spyre", device_args)):
                wall, in_tests, tail = run([*extra, *args.pytest_args], junit)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, in_tests, tail)
    host, spyre = best["host"], best["spyre"]
    print(f"{'run':<8}{'wall s':>10}{'tests s':>10}  result")
    for name, (wall, in_tests, tail) in best.items():
        print(f"{name:<8}{wall:>10.2f}{in_tests:>10.2f}  {tail}")
    wall_ratio = spyre[0] / host[0]
    test_ratio = spyre[1] / host[1] if host[1] > 0 else float("inf")
    print(f"ratio spyre/host: wall {wall_ratio:.2f}x, in tests {test_ratio:.2f}x (target < 3x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
