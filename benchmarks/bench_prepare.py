"""Time ``spyre_adapters.prepare`` of tester-sized models with one adapter's versions swapped.

Run: ``python benchmarks/bench_prepare.py [--adapter integer-pow] [--old 1.0.0] [--rounds N]``.
A Transformers test file builds its model a dozen times and ``pytest --spyre`` prepares each,
so what an adapter's match costs per model is paid many times per file. For each family
(Llama, BERT, GPT-2, T5, Whisper, ViT: the tiny preset of the family builder, random weights,
no downloads) this copies fresh models and prepares them at 2026.09 with two registries side by side, interleaved round
by round so both see the same machine load: the installed one (the adapter's newest version)
and one where ``--old`` is that adapter's newest. Prints the median prepare time of each and
the median per-pair ratio old/new. The applied adapter lists are checked to be the same but for
the swapped version.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

FAMILIES = ("llama", "bert", "gpt2", "t5", "whisper", "vit")


def _builder(model_type: str) -> Callable[[], Any]:
    """Fresh models of ``model_type`` at the tiny preset (the project's family builder: the
    family's config shrunk, random weights), each built as a test builds its own."""
    import copy

    from spyre_adapters.enablement.families import build_family
    from spyre_adapters.enablement.size_presets import TINY

    built = build_family(model_type, preset=TINY)
    template = built.model
    return lambda: copy.deepcopy(template)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="integer-pow")
    parser.add_argument("--old", default="1.0.0", help="the version to compare the newest with")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stack", default="2026.09")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    import spyre_adapters
    from spyre_adapters.preparation import default_registry
    from spyre_adapters.registry import Registry

    installed = default_registry()
    versions = [str(m.version) for m in installed.versions(args.adapter)]
    if args.old not in versions:
        parser.error(f"{args.adapter} {args.old} is not installed (installed: {versions})")
    newest = versions[-1]
    older = installed.where(
        lambda m: m.name != args.adapter or m.version <= type(m.version)(args.old)
    )

    def timed(build: Callable[[], Any], registry: Registry) -> tuple[float, list[str]]:
        model = build()
        start = time.perf_counter()
        spyre_adapters.prepare(model, args.stack, registry=registry)
        seconds = time.perf_counter() - start
        return seconds, sorted(a.name for a in spyre_adapters.applied(model))

    print(f"prepare at {args.stack}: {args.adapter} {newest} (new) against {args.old} (old)")
    print(f"{'family':10} {'new ms':>8} {'old ms':>8} {'old/new':>8}")
    all_ratios = []
    for family in FAMILIES:
        build = _builder(family)
        _, names_new = timed(build, installed)
        _, names_old = timed(build, older)
        if names_new != names_old:
            raise SystemExit(f"{family}: different adapters applied: {names_new} / {names_old}")
        new, old, ratios = [], [], []
        for _ in range(args.rounds):
            a, _ = timed(build, installed)
            b, _ = timed(build, older)
            new.append(a * 1e3)
            old.append(b * 1e3)
            ratios.append(b / a)
        all_ratios += ratios
        print(
            f"{family:10} {statistics.median(new):8.1f} {statistics.median(old):8.1f} "
            f"{statistics.median(ratios):8.2f}"
        )
    print(f"{'all':10} {'':8} {'':8} {statistics.median(all_ratios):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
