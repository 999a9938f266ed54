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

Results: a :class:`SweepReport`, whose JSON document (``schema_version`` 1) is documented in
:mod:`spyre_adapters.enablement._sweep_report`, shown as terminal tables (:func:`report_tables`)
and an offline HTML page (:func:`write_html`) by :mod:`spyre_adapters.enablement._sweep_summary`.
This module runs the sweep and re-exports those names.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from spyre_adapters.enablement._isolation import Outcome, WorkerPool, run_isolated
from spyre_adapters.enablement._sweep_report import (
    DEFAULT_TIMEOUT,
    SWEEP_SCHEMA_VERSION,
    SweepReport,
    load_results,
)
from spyre_adapters.enablement._sweep_summary import report_tables, write_html
from spyre_adapters.enablement.results import Category, TriageResult
from spyre_adapters.enablement.size_presets import REALISTIC, TINY, SizePreset

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

    from spyre_adapters.enablement.size_presets import FamilyBuildError
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
