"""Time ``audit`` over every built-in stack release with 1,000 synthetic adapter manifests.

Run: ``python benchmarks/bench_audit.py [--count 1000] [--repeat 3]``. Generates the manifests
(``<name>/<version>.toml``, several versions per name, every kind, gaps from the catalogue,
assorted ``stacks`` ranges and ``retire_by`` releases) in a temporary folder with a tiny
implementation module, loads and validates them into a registry, then audits every release
(statuses, JSON documents and gate findings). Prints the timings; the target for the audit of
all releases is under 2 seconds. Exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from spyre_adapters import Registry, audit_release
from spyre_sim.catalogue import builtin_catalogue

TARGET_SECONDS = 2.0
_IMPL = """
class Noop:
    def matches(self, model):
        return False

    def apply(self, model, edit):
        pass


adapter = Noop()
"""


def generate(root: Path, count: int, seed: int = 20261130) -> None:
    """Write ``count`` manifests under ``root`` (deterministic for a seed)."""
    catalogue = builtin_catalogue()
    rng = random.Random(seed)
    names = [r.name for r in catalogue.releases]
    lasting = [g for g, gap in catalogue.gaps.items() if gap.nature.value == "lasting"]
    transitional = [g for g, gap in catalogue.gaps.items() if gap.nature.value != "lasting"]
    (root / "bench_impl.py").write_text(_IMPL)
    written = 0
    index = 0
    while written < count:
        name = f"synthetic-{index:04d}"
        index += 1
        for major in range(1, rng.randint(1, 3) + 1):
            if written == count:
                break
            permanent = rng.random() < 0.2
            gaps = rng.sample(transitional, rng.randint(1, 3))
            if permanent:
                gaps = [rng.choice(lasting), *gaps[:1]]
            low = rng.choice(names)
            later = names[names.index(low) + 1 :]  # an upper bound above the lower one
            upper = f">={low},<{rng.choice(later)}" if later else f">={low}"
            stacks = rng.choice([f">={low}", upper, f"!={low}"])
            lines = [
                "schema_version = 1",
                f'name = "{name}"',
                f'version = "{major}.0"',
                f'kind = "{"permanent" if permanent else "scaffolding"}"',
                f'summary = "synthetic adapter {name} {major}.0"',
                f"gaps = {json.dumps(gaps)}",
                'families = ["llama", "gpt2"]',
                f'stacks = "{stacks}"',
                'entry_point = "bench_impl:adapter"',
                f"order = {rng.randint(0, 200)}",
            ]
            if not permanent and rng.random() < 0.3:
                lines.append(f'retire_by = "{rng.choice(names)}"')
            folder = root / "manifests" / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{major}.0.toml").write_text("\n".join(lines) + "\n")
            written += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    catalogue = builtin_catalogue()
    # validating an entry point imports the adapter contract, and so torch: once per process,
    # timed apart so that the load figure is the project's own work
    start = time.perf_counter()
    import spyre_adapters.contract  # noqa: F401

    imports = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate(root, args.count)
        # the synthetic manifests go to a parse cache of the run's own, empty: a first load
        os.environ["SPYRE_ADAPTERS_CACHE_DIR"] = str(root / "cache")
        sys.path.insert(0, str(root))
        try:
            start = time.perf_counter()
            registry = Registry(catalogue)
            registry.load_directory(root / "manifests")
            load = time.perf_counter() - start
            best = float("inf")
            findings = 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                findings = 0
                for release in catalogue.releases:
                    report = audit_release(registry, release)
                    json.dumps(report.to_json())
                    findings += len(report.findings())
                best = min(best, time.perf_counter() - start)
        finally:
            sys.path.remove(str(root))
    releases = len(catalogue.releases)
    print(f"import of the adapter contract (torch): {imports:.3f} s, once per process")
    print(f"load+validate {len(registry)} manifests ({len(registry.names())} names): {load:.3f} s")
    print(
        f"audit of {len(registry)} manifests x {releases} releases (statuses, JSON, gate): "
        f"{best:.3f} s (best of {args.repeat}; target < {TARGET_SECONDS:.0f} s; "
        f"{findings} findings)"
    )
    return 0 if best < TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
