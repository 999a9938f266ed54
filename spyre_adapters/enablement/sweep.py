"""The enablement sweep: triage many families at many stack releases, each family isolated.

:func:`run_sweep` triages every (family, release) pair: each family runs in its own worker
process (built once, then triaged at each release) with a time limit, ``jobs`` workers at a
time, so a crash or a hang costs one family its row (``worker-crashed`` / ``worker-timeout``)
and never the sweep. The same per-family work is what :mod:`pytest_spyre.sweep_items` runs as
pytest items distributed by pytest-xdist (across cores or machines); both go through
:func:`isolated_triage` and :func:`spyre_adapters.enablement.classification.classify`.

With a Transformers test tree (``testers``), the unit of work is a test file: its worker
builds every model tester of the file (:mod:`spyre_adapters.enablement.testers`, the testers' tiny sizes
with preset ``tester``, or scaled to realistic widths with ``tester-scaled``) and triages each
model type it yields; a file none of whose testers builds gives one ``build-failed`` row named
after its folder. The same model type from two files is kept once (the first file).

Results: :class:`SweepReport`, written as JSON (:meth:`SweepReport.to_json`), a terminal table
(:func:`report_tables`) and an offline HTML page (:func:`write_html`).

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
           "touched": {"rope-rotation 1.0.0": ["model.layers.0.self_attn"]}}  # modules changed
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyre_adapters.enablement._isolation import Outcome, WorkerPool, run_isolated
from spyre_adapters.enablement.family_configs import REALISTIC, TINY, SizePreset
from spyre_adapters.enablement.results import Category, TriageResult
from spyre_adapters.tables import TableData

__all__ = [
    "SWEEP_SCHEMA_VERSION",
    "SweepReport",
    "default_releases",
    "isolated_triage",
    "load_results",
    "report_tables",
    "run_sweep",
    "write_html",
]

SWEEP_SCHEMA_VERSION = 1

#: Seconds one (family, release) may take in a worker before the worker is killed.
DEFAULT_TIMEOUT = 300.0

Worker = Callable[[str, list[str], str, bool], list[dict[str, Any]]]


def default_releases() -> list[str]:
    """Every built-in stack release, oldest first."""
    from spyre_adapters.stacks import default_catalogue

    return [release.name for release in default_catalogue().releases]


def preset_named(name: str) -> SizePreset:
    """The size preset called ``name`` (``realistic`` or ``tiny``)."""
    presets = {p.name: p for p in (REALISTIC, TINY)}
    if name in ("tester", "tester-scaled"):
        raise ValueError(
            f"preset {name!r} is built from a test tree (spyre_adapters.enablement.testers)"
        )
    if name not in presets:
        raise ValueError(f"unknown size preset {name!r}; known: {', '.join(presets)}")
    return presets[name]


def triage_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    """The work of one isolated worker: triage ``family`` at ``releases`` (JSON results)."""
    import torch
    import transformers

    from spyre_adapters.enablement.triage import triage_family

    torch.set_num_threads(1)  # workers run in parallel: one core each
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # stderr: bar
    results = triage_family(
        family,
        releases,
        preset=preset_named(preset),
        layout_checks=layout_checks,
        stock_all_gaps=False,  # the matrix needs what blocks the adapted run, not more
    )
    return [r.to_json() for r in results]


def tester_worker(
    file: str, releases: list[str], preset: str, layout_checks: bool, tree: str
) -> list[dict[str, Any]]:
    """The work of one isolated worker over a test tree: triage every model type the model
    testers of test file ``file`` build, at ``releases`` (JSON results)."""
    import torch
    import transformers

    from spyre_adapters.enablement.family_configs import FamilyBuildError
    from spyre_adapters.enablement.testers import build_entry, testers_in_file
    from spyre_adapters.enablement.triage import triage

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    folder = Path(file).parent.name
    try:
        entries = testers_in_file(Path(tree), file)
    except Exception as exc:
        text = f"{file}: the test file does not import: {type(exc).__name__}: {exc}"
        return [
            TriageResult(folder, r, preset, Category.BUILD_FAILED, text[:500]).to_json()
            for r in releases
        ]
    if not entries:
        text = f"{file}: no model tester of the file can be made"
        return [
            TriageResult(folder, r, preset, Category.BUILD_FAILED, text).to_json() for r in releases
        ]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.model_type in seen:
            continue
        seen.add(entry.model_type)
        start = time.perf_counter()
        try:
            built = build_entry(entry, scaled=preset == "tester-scaled")
        except FamilyBuildError as exc:
            category = (
                Category.REFERENCE_FAILED
                if exc.stage in ("forward", "reference")
                else Category.BUILD_FAILED
            )
            share = (time.perf_counter() - start) / max(len(releases), 1)
            detail = f"{exc} ({entry.file}::{entry.test_class})"
            out.extend(
                TriageResult(entry.model_type, r, preset, category, detail, seconds=share).to_json()
                for r in releases
            )
            continue
        for release in releases:
            result = triage(built, release, layout_checks=layout_checks, stock_all_gaps=False)
            result.preset = preset
            out.append(result.to_json())
    return out


#: The test tree's shared modules every tester file imports (about a minute of imports):
#: imported once in the fork server workers start from.
_TESTER_PRELOAD = (
    "tests.test_modeling_common",
    "tests.causal_lm_tester",
    "tests.vlm_tester",
    "tests.alm_tester",
    "tests.multimodal_tester",
)


def tester_context(tree: Path) -> Any:
    """The multiprocessing context of tester workers: a fork server that has imported the
    test tree's shared modules too (the tree goes first on ``sys.path``)."""
    from spyre_adapters.enablement._isolation import _PRELOAD, isolation_context
    from spyre_adapters.enablement.testers import prepared_tree

    root = str(prepared_tree(tree))
    if root not in sys.path:
        sys.path.insert(0, root)
    return isolation_context((*_PRELOAD, *_TESTER_PRELOAD))


def isolated_triage(
    family: str,
    releases: Sequence[str],
    *,
    preset: str = "realistic",
    layout_checks: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    worker: Worker = triage_worker,
    testers: Path | None = None,
    pool: WorkerPool | None = None,
) -> list[TriageResult]:
    """Triage ``family`` at ``releases`` in an isolated worker process (of ``pool``, else of
    a pool of its own); a crash, hang or internal error becomes a result with the matching
    fixed category at every release. With ``testers`` (a test tree), ``family`` is a test
    file of it (:func:`tester_worker`), and ``pool`` must start from :func:`tester_context`."""
    limit = timeout * max(len(releases), 1)
    if testers is not None:
        limit *= 2  # a test file may hold more than one model type
        outcome: Outcome = run_isolated(
            tester_worker,
            (family, list(releases), preset, layout_checks, str(testers)),
            timeout=limit,
            context=tester_context(testers),
            pool=pool,
        )
        if outcome.status != "ok":
            family = Path(family).parent.name
    else:
        outcome = run_isolated(
            worker, (family, list(releases), preset, layout_checks), timeout=limit, pool=pool
        )
    if outcome.status == "ok":
        return [TriageResult.from_json(item) for item in outcome.value]
    category = {
        "timeout": Category.WORKER_TIMEOUT,
        "crashed": Category.WORKER_CRASHED,
    }.get(outcome.status, Category.INTERNAL_ERROR)
    detail = outcome.error.strip().splitlines()[-1] if outcome.error.strip() else outcome.status
    share = outcome.seconds / max(len(releases), 1)
    return [TriageResult(family, r, preset, category, detail, seconds=share) for r in releases]


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


def _adapter_names() -> tuple[list[str], list[str]]:
    """Registered adapter names, and those of them that are generated."""
    try:
        from spyre_adapters import default_registry

        registry = default_registry()
    except Exception:  # the sweep still runs (and reports) without a registry
        return [], []
    names = registry.names()
    generated = [n for n in names if any(m.generated for m in registry.versions(n))]
    return names, generated


def run_sweep(
    families: Iterable[str],
    releases: Sequence[str],
    *,
    preset: str = "realistic",
    layout_checks: bool = True,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = False,
    worker: Worker = triage_worker,
    log: Path | None = None,
    testers: Path | None = None,
) -> SweepReport:
    """Triage every family at every release, ``jobs`` isolated workers at a time (default:
    the number of CPUs). ``progress`` shows a progress bar on stderr; ``log`` appends each
    result as one JSON line as soon as its family is done (to watch or salvage long sweeps);
    when the log cannot be written the sweep says so on stderr and goes on without it.

    With ``testers`` (a Transformers test tree), ``families`` are test files of it
    (:func:`spyre_adapters.enablement.testers.test_files`) and ``preset`` is ``tester`` or
    ``tester-scaled``; the report's families are the model types their testers build."""
    families = sorted(set(families))
    jobs = max(1, jobs or os.cpu_count() or 1)
    names, generated = _adapter_names()
    report = SweepReport(
        releases=list(releases),
        families=families,
        preset=preset,
        layout_checks=layout_checks,
        jobs=jobs,
        timeout=timeout,
        adapters=names,
        generated=generated,
        testers=None if testers is None else str(testers),
    )
    start = time.perf_counter()
    context = None if testers is None else tester_context(testers)
    with (
        _progress(progress, len(families) * len(releases)) as advance,
        WorkerPool(jobs, context) as workers,
        ThreadPoolExecutor(jobs) as waiting,  # each thread waits for one worker's call
    ):
        futures = {
            waiting.submit(
                isolated_triage,
                family,
                releases,
                preset=preset,
                layout_checks=layout_checks,
                timeout=timeout,
                worker=worker,
                testers=testers,
                pool=workers,
            ): family
            for family in families
        }
        done: dict[str, list[TriageResult]] = {}
        for future in as_completed(futures):
            rows = future.result()
            done[futures[future]] = rows
            if log is not None and not _append(log, rows):
                log = None  # the results are still in the report: the sweep goes on
            advance(futures[future], rows)
    report.results.extend(_once_per_type(families, done))
    if testers is not None:
        report.families = sorted({r.family for r in report.results})
    report.wall_seconds = time.perf_counter() - start
    return report


def _once_per_type(units: Sequence[str], done: dict[str, list[TriageResult]]) -> list[TriageResult]:
    """Each model type's rows once: from the first unit (test file) that built it, else from
    the first unit that tried."""
    groups: dict[str, list[list[TriageResult]]] = {}
    for unit in units:
        by_type: dict[str, list[TriageResult]] = {}
        for row in done.get(unit, []):
            by_type.setdefault(row.family, []).append(row)
        for family, rows in by_type.items():
            groups.setdefault(family, []).append(rows)
    out: list[TriageResult] = []
    for candidates in groups.values():
        built = [rows for rows in candidates if any(r.category.built for r in rows)]
        out.extend((built or candidates)[0])
    return out


def _append(log: Path, rows: list[TriageResult]) -> bool:
    """Append ``rows`` to the log as JSON lines; on failure say so on stderr, return False."""
    try:
        with log.open("a", encoding="utf-8") as stream:
            stream.writelines(json.dumps(r.to_json()) + "\n" for r in rows)
    except OSError as error:
        sys.stderr.write(
            f"spyre-adapters: could not append to the sweep log {log} "
            f"({error.strerror or error}); logging stopped, the sweep goes on and every result "
            "is kept for the final report\n"
        )
        return False
    return True


class _progress:
    """A rich progress bar on stderr (or nothing), advanced once per finished family."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled
        self.total = total
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Callable[[str, list[TriageResult]], None]:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._bar.start()
            self._task = self._bar.add_task("sweep", total=self.total)
        return self._advance

    def _advance(self, family: str, rows: list[TriageResult]) -> None:
        if self._bar is not None:
            enabled = sum(1 for r in rows if r.category.enabled)
            self._bar.update(
                self._task,
                advance=len(rows),
                description=f"sweep ({family}: {enabled}/{len(rows)} enabled)",
            )

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def load_results(directory: Path) -> list[TriageResult]:
    """Results written one file per (family, release) by the pytest sweep items."""
    results: list[TriageResult] = []
    for path in sorted(directory.glob("results/*.json")):
        results.extend(TriageResult.from_json(item) for item in json.loads(path.read_text("utf-8")))
    return results


def report_tables(report: SweepReport, *, matrix: bool = True) -> list[TableData]:
    """The terminal tables: the matrix (family x release) and the per-release summary."""
    tables = []
    if matrix:
        grid = TableData(
            f"Enablement matrix ({report.preset} sizes, layout checks "
            f"{'on' if report.layout_checks else 'off'})",
            ["family", *report.releases],
        )
        for family in report.families:
            row = [family]
            for release in report.releases:
                result = report.result(family, release)
                row.append(result.category.value if result is not None else "-")
            grid.rows.append(row)
        tables.append(grid)
    summary = report.summary()
    table = TableData(
        "Families per release",
        [
            "release",
            "enabled",
            "native",
            "adapted",
            "blocked",
            "mismatch",
            "other",
            "built",
            "swept",
        ],
        caption=f"wall {report.wall_seconds:.1f} s; mean {report.mean_seconds():.2f} s per "
        f"(family, release); {report.jobs} workers",
    )
    for release in report.releases:
        counts = summary[release]
        other = counts["built"] - sum(
            counts[c] for c in ("native", "adapted", "blocked", "mismatch")
        )
        table.rows.append(
            [
                release,
                str(counts["enabled"]),
                str(counts["native"]),
                str(counts["adapted"]),
                str(counts["blocked"]),
                str(counts["mismatch"]),
                str(other),
                str(counts["built"]),
                str(counts["total"]),
            ]
        )
    tables.append(table)
    blockers = report.top_blockers()
    if blockers:
        gaps = TableData("Gaps without an adapter (blocked pairs)", ["gap", "pairs", "families"])
        for item in blockers:
            names = item["families"]
            shown = ", ".join(names[:8]) + (f" (+{len(names) - 8})" if len(names) > 8 else "")
            gaps.rows.append([item["gap"], str(item["pairs"]), shown])
        tables.append(gaps)
    return tables


def write_html(report: SweepReport, path: Path) -> None:
    """Write the offline HTML page (colour grid + chart of families enabled per release),
    atomically (:func:`spyre_adapters._outputs.write_text`)."""
    from spyre_adapters._outputs import write_text
    from spyre_adapters.enablement._sweep_html import render

    write_text(path, render(report.to_json()))
