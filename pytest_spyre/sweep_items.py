"""The enablement sweep as pytest items, so pytest-xdist can spread it over cores and machines.

One item per (family, release); each runs the same isolated worker as ``spyre-adapters sweep``
(:func:`spyre_adapters.enablement.sweep.isolated_triage`, so the same :func:`~spyre_adapters.enablement.classification.classify`)
and writes its result to ``DIR/results/<family>@<release>.json``. The item passes whatever the
verdict (the verdict is data; an item fails only when the sweep machinery itself fails). At the
end, the controller (never an xdist worker) merges every result file into ``DIR/sweep.json``
(schema of :mod:`spyre_adapters.enablement.sweep`) and ``DIR/sweep.html``, and prints the summary.

Usage (other test paths are not collected while ``--sweep-out`` is given)::

    pytest -p spyre_adapters.sweep_items --sweep-out DIR -n auto \\
        [--sweep-families llama,gpt2] [--sweep-releases 2026.05,2026.09] \\
        [--sweep-tiny] [--sweep-timeout 300] [--sweep-no-layout-checks]

``DIR`` is checked before any item runs (a usage error when it cannot be created or written).
When ``sweep.json`` or ``sweep.html`` cannot be written at the end, it goes to a fallback file
in the temporary directory (named in the summary) and the run exits 3; the per-pair files in
``DIR/results`` stay, and a failed per-pair write fails its item with the result kept.

Across machines, use pytest-xdist's own remote workers (``--tx ssh=host//python=...``) or split
the families between CI jobs (``--sweep-families``) with a shared ``DIR``; re-running only
merges what is in ``DIR/results``.

This module imports neither torch nor transformers at import time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["SweepItem"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("spyre-sweep", "spyre-adapters enablement sweep")
    group.addoption(
        "--sweep-out",
        metavar="DIR",
        default=None,
        help="run the enablement sweep as test items; results go to DIR",
    )
    group.addoption(
        "--sweep-families",
        metavar="A,B",
        default=None,
        help="comma-separated model types (default: every one with a base model)",
    )
    group.addoption(
        "--sweep-releases",
        metavar="R1,R2",
        default=None,
        help="comma-separated stack releases (default: every built-in one)",
    )
    group.addoption("--sweep-tiny", action="store_true", help="Transformers' tiny tester sizes")
    group.addoption("--sweep-no-layout-checks", action="store_true", help="device layout rules off")
    group.addoption(
        "--sweep-timeout",
        type=float,
        default=300.0,
        help="seconds per (family, release) before the worker is killed",
    )


def _enabled(config: pytest.Config) -> bool:
    return config.getoption("--sweep-out") is not None


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


class SweepItem(pytest.Item):
    """One (family, release) of the sweep."""

    def __init__(self, *, family: str, release: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.family = family
        self.release = release

    def runtest(self) -> None:
        from spyre_adapters._outputs import save
        from spyre_adapters.enablement.sweep import isolated_triage

        config = self.config
        out = Path(config.getoption("--sweep-out")) / "results"
        out.mkdir(parents=True, exist_ok=True)
        results = isolated_triage(
            self.family,
            [self.release],
            preset="tiny" if config.getoption("--sweep-tiny") else "realistic",
            layout_checks=not config.getoption("--sweep-no-layout-checks"),
            timeout=config.getoption("--sweep-timeout"),
        )
        for result in results:
            self.user_properties.append(("category", result.category.value))
        target = out / f"{self.family}@{self.release}.json"
        text = json.dumps([r.to_json() for r in results])
        saved = save(target, text)
        if not saved.ok:  # the item fails, but keeps its result
            kept = f"saved to {saved.path}" if saved.path is not None else f"result: {text}"
            raise OSError(f"could not write {target} ({saved.error}); {kept}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"sweep {self.family} @ {self.release}"


class _SweepCollector(pytest.Collector):
    def collect(self) -> Iterator[pytest.Item]:
        from spyre_adapters.enablement.families import candidate_families
        from spyre_adapters.enablement.sweep import default_releases

        config = self.config
        families = _split(config.getoption("--sweep-families")) or candidate_families()
        releases = _split(config.getoption("--sweep-releases")) or default_releases()
        unknown = sorted(set(releases) - set(default_releases()))
        if unknown:
            raise pytest.UsageError(
                f"--sweep-releases: unknown releases {unknown}; known: {default_releases()}"
            )
        for family in sorted(set(families)):
            for release in releases:
                yield SweepItem.from_parent(
                    self, name=f"{family}@{release}", family=family, release=release
                )


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """While sweeping, collect no test files: the items come from the sweep."""
    if _enabled(config) and collection_path.is_file():
        return True
    return None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not _enabled(config):
        return
    collector = _SweepCollector.from_parent(session, name="spyre-sweep")
    items[:] = list(collector.collect())


def pytest_configure(config: pytest.Config) -> None:
    if _enabled(config):
        from spyre_adapters._outputs import OutputPathError, check_directory

        try:  # before any item runs: a bad DIR must not cost a sweep
            check_directory(config.getoption("--sweep-out"))
        except OutputPathError as error:
            raise pytest.UsageError(f"--sweep-out: {error}") from None
        config.stash[_START] = time.perf_counter()


_START = pytest.StashKey[float]()


def _workers(config: pytest.Config) -> int:
    """The number of xdist workers (xdist resolves ``-n auto`` to a number); 1 without."""
    value = getattr(config.option, "numprocesses", None)
    return value if isinstance(value, int) and value > 0 else 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _enabled(config) or hasattr(config, "workerinput"):
        return  # xdist workers leave the merge to the controller
    from spyre_adapters._outputs import save
    from spyre_adapters.enablement._sweep_html import render
    from spyre_adapters.enablement.sweep import SweepReport, default_releases, load_results

    out = Path(config.getoption("--sweep-out"))
    results = load_results(out)
    if not results:
        return
    releases = _split(config.getoption("--sweep-releases")) or default_releases()
    report = SweepReport(
        releases=[r for r in releases if any(x.release == r for x in results)],
        families=sorted({r.family for r in results}),
        preset=results[0].preset,
        layout_checks=not config.getoption("--sweep-no-layout-checks"),
        results=results,
        jobs=_workers(config),
        timeout=config.getoption("--sweep-timeout"),
        wall_seconds=time.perf_counter() - config.stash.get(_START, time.perf_counter()),
    )
    document = report.to_json()
    written = [
        save(out / "sweep.json", json.dumps(document, indent=1) + "\n"),
        save(out / "sweep.html", render(document)),
    ]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for saved, what in zip(written, ("the sweep JSON", "the sweep page"), strict=True):
        if saved.ok:
            continue
        message = saved.message(what).replace(
            "it follows on stdout", f"the result of each pair stays in {out / 'results'}"
        )
        if reporter is not None:
            reporter.write_line(f"spyre-adapters: {message}", red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "spyre-adapters sweep")
        for release, counts in report.summary().items():
            reporter.write_line(
                f"{release}: {counts['enabled']} enabled ({counts['native']} native, "
                f"{counts['adapted']} adapted) of {counts['built']} built, {counts['total']} swept"
            )
        reporter.write_line(f"results: {', '.join(str(s.path) for s in written if s.path)}")
