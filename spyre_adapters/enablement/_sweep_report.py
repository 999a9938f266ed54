"""The sweep report: :class:`SweepReport`, the results of a sweep and how it ran, its summary
per release, and its JSON document (:meth:`SweepReport.to_json` / :meth:`SweepReport.from_json`).

JSON schema (``schema_version`` 1; keys are only ever added, never renamed; ``category`` values
are :class:`~spyre_adapters.enablement.results.Category` values, also never renamed)::

    {
      "schema_version": 1,
      "kind": "sweep",
      "preset": "realistic",             # family sizes: realistic | tiny
      "layout_checks": true,
      "releases": ["2026.05", ...],      # swept releases, oldest first
      "families": ["bert", ...],         # swept model types, sorted
      "jobs": 2, "timeout": 300.0,       # workers at a time; seconds per (family, release)
      "wall_seconds": 812.4,             # wall time of the whole sweep
      "mean_seconds": 1.9,               # mean worker seconds per (family, release)
      "versions": {"transformers": "5.24.0", "torch": "2.13.0", "spyre_adapters": "..."},
      "adapters": ["rms-norm", ...],     # registered adapter names
      "generated": ["bridge-sort", ...], # those of them written by `spyre-adapters bridge`
      "hand_written": 15,                # registered adapter names that are not generated
      "testers": null,                   # or the test tree the configs and inputs came from
      "left_out": [{"family", "category", "detail"}],  # not in the denominator, and why
      "summary": {
        "2026.05": {"native": 10, "adapted": 90, ..., # every category, zeros included
                    "enabled": 100, "built": 380, "total": 400,
                    "adapted_generated": 30}  # adapted with a generated adapter applied
      },
      "top_blockers": [{"gap": "sin-cos", "pairs": 12, "families": ["..."]}],
      "results": [                       # one per (family, release), sorted
        {"family": "llama", "release": "2026.05", "preset": "realistic",
         "category": "adapted", "enabled": true, "detail": "...",
         "kind": "causal-lm",            # or "base"; null when it did not build
         "stock":   {run} | null,        # the stock device run
         "adapted": {run} | null,        # the adapted run (null when stock is native)
         "bridging": {"sin-cos": ["rope-rotation"]},   # gap -> adapters listing it
         "blockers": [{gap, op, module_path, count, raised}],
         "suggestions": {"gap": "TOML manifest skeleton"},
         "seconds": 1.7,
         "fit": "preset",               # "depth": built with the family's own widths
         "variants": [{"preset": "realistic-mqa", "ok": true, "detail": "...",
                       "miscompiles": []}],  # size variants checked when enabled
         "variants_ok": true}           # every variant passed (category is unchanged)
      ]
    }

    run = {"ran": bool, "error": {"kind": "lowering|prepare|other", "type", "message", "gap",
           "op", "module_path"} | null, "gaps": [{gap, op, module_path, count, raised}],
           "fallbacks": {"aten.arange.default": 1}, "miscompiles": ["rotate-half"],
           "comparison": {"matches", "cosine", "max_abs_error", "top1", "scored",
           "criterion"} | null, "adapters": ["rope-rotation 1.0.0"], "seconds": float,
           "all_gaps_listed": bool,
           "bridged": {"aten.sort.default": 2},   # calls computed by an op bridge
           "idle": ["bridge-isinf 1.1.0"],        # op bridges applied that bridged nothing
           "miscompiled_in": {"rotate-half": ["model.layers.0.self_attn"]},  # gap -> modules
           "touched": {"rope-rotation 1.0.0": ["model.layers.0.self_attn"]},  # modules changed
           "rounding_ties": {"aten.topk": 24},    # rows decided within one DL16 step
           "replayed": {comparison} | null,       # again with the CPU's choice at those rows
           "replayed_rows": 10,                   # rows the replay gave the CPU's choice
           "emulator_limits": {"fp16-range": 9}}  # results the emulator could not compute
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyre_adapters.enablement.results import Category, TriageResult

__all__ = ["DEFAULT_TIMEOUT", "SWEEP_SCHEMA_VERSION", "SweepReport", "load_results"]

SWEEP_SCHEMA_VERSION = 1

#: Seconds one (family, release) may take in a worker before the worker is killed.
DEFAULT_TIMEOUT = 300.0


@dataclass
class SweepReport:
    """The results of a sweep and how it ran."""

    releases: list[str]
    families: list[str]
    preset: str
    layout_checks: bool
    results: list[TriageResult] = field(default_factory=list)
    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    wall_seconds: float = 0.0
    adapters: list[str] = field(default_factory=list)
    generated: list[str] = field(default_factory=list)
    testers: str | None = None

    def result(self, family: str, release: str) -> TriageResult | None:
        for result in self.results:
            if result.family == family and result.release == release:
                return result
        return None

    def summary(self) -> dict[str, dict[str, int]]:
        """Per release: the count of each category, ``enabled``, ``built`` and ``total``."""
        out: dict[str, dict[str, int]] = {}
        for release in self.releases:
            rows = [r for r in self.results if r.release == release]
            counts = {c.value: 0 for c in Category}
            for row in rows:
                counts[row.category.value] += 1
            counts["enabled"] = sum(1 for r in rows if r.category.enabled)
            counts["built"] = sum(1 for r in rows if r.category.built)
            counts["total"] = len(rows)
            counts["adapted_generated"] = sum(
                1 for r in rows if r.category is Category.ADAPTED and self._uses_generated(r)
            )
            out[release] = counts
        return out

    def _uses_generated(self, result: TriageResult) -> bool:
        """The adapted run needed a generated adapter: one of them bridged a call."""
        run = result.adapted
        names = set(self.generated)
        return run is not None and any(label.split()[0] in names for label in run.working)

    def left_out(self) -> list[dict[str, str]]:
        """The model types that are not in the denominator (not built at any release), with
        their category and why, one per type."""
        built = {r.family for r in self.results if r.category.built}
        seen: dict[str, dict[str, str]] = {}
        for result in sorted(self.results, key=lambda r: (r.family, _order(self, r.release))):
            if result.family in built or result.family in seen:
                continue
            seen[result.family] = {
                "family": result.family,
                "category": result.category.value,
                "detail": result.detail,
            }
        return list(seen.values())

    def top_blockers(self, limit: int = 15) -> list[dict[str, Any]]:
        """Gaps that stop (family, release) pairs with no adapter, most frequent first."""
        pairs: collections.Counter[str] = collections.Counter()
        families: dict[str, set[str]] = collections.defaultdict(set)
        for result in self.results:
            if result.category is not Category.BLOCKED:
                continue
            for gap in sorted({h.gap for h in result.blockers if not result.bridging.get(h.gap)}):
                pairs[gap] += 1
                families[gap].add(result.family)
        return [
            {"gap": gap, "pairs": count, "families": sorted(families[gap])}
            for gap, count in pairs.most_common(limit)
        ]

    def mean_seconds(self) -> float:
        return sum(r.seconds for r in self.results) / len(self.results) if self.results else 0.0

    def to_json(self) -> dict[str, Any]:
        """The documented JSON document (see the module docstring)."""
        return {
            "schema_version": SWEEP_SCHEMA_VERSION,
            "kind": "sweep",
            "preset": self.preset,
            "layout_checks": self.layout_checks,
            "releases": list(self.releases),
            "families": list(self.families),
            "jobs": self.jobs,
            "timeout": self.timeout,
            "wall_seconds": round(self.wall_seconds, 3),
            "mean_seconds": round(self.mean_seconds(), 4),
            "versions": _versions(),
            "adapters": list(self.adapters),
            "generated": list(self.generated),
            "hand_written": len([a for a in self.adapters if a not in set(self.generated)]),
            "testers": self.testers,
            "summary": self.summary(),
            "top_blockers": self.top_blockers(),
            "left_out": self.left_out(),
            "results": [
                r.to_json()
                for r in sorted(self.results, key=lambda r: (r.family, _order(self, r.release)))
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepReport:
        if data.get("kind") != "sweep" or data.get("schema_version") != SWEEP_SCHEMA_VERSION:
            raise ValueError(
                "not a sweep document of schema_version 1 "
                f"(got kind={data.get('kind')!r}, schema_version={data.get('schema_version')!r})"
            )
        return cls(
            releases=list(data["releases"]),
            families=list(data["families"]),
            preset=data["preset"],
            layout_checks=data["layout_checks"],
            results=[TriageResult.from_json(r) for r in data["results"]],
            jobs=data.get("jobs", 1),
            timeout=data.get("timeout", DEFAULT_TIMEOUT),
            wall_seconds=data.get("wall_seconds", 0.0),
            adapters=list(data.get("adapters", [])),
            generated=list(data.get("generated", [])),
            testers=data.get("testers"),
        )


def _order(report: SweepReport, release: str) -> int:
    return report.releases.index(release) if release in report.releases else len(report.releases)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("transformers", "torch", "spyre-adapters"):
        try:
            out[package.replace("-", "_")] = version(package)
        except PackageNotFoundError:
            out[package.replace("-", "_")] = "unknown"
    return out


def load_results(directory: Path) -> list[TriageResult]:
    """Results written one file per (family, release) by the pytest sweep items."""
    results: list[TriageResult] = []
    for path in sorted(directory.glob("results/*.json")):
        results.extend(TriageResult.from_json(item) for item in json.loads(path.read_text("utf-8")))
    return results
