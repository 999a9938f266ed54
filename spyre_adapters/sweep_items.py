"""The enablement sweep as pytest items, so pytest-xdist can spread it over cores and machines.

One item per (family, release); each runs the same isolated worker as ``spyre-adapters sweep``
(:func:`spyre_adapters.sweep.isolated_triage`, so the same :func:`~spyre_adapters.triage.classify`)
and writes its result to ``DIR/results/<family>@<release>.json``. The item passes whatever the
verdict (the verdict is data; an item fails only when the sweep machinery itself fails). At the
end, the controller (never an xdist worker) merges every result file into ``DIR/sweep.json``
(schema of :mod:`spyre_adapters.sweep`) and ``DIR/sweep.html``, and prints the summary.

Usage (other test paths are not collected while ``--sweep-out`` is given)::

    pytest -p spyre_adapters.sweep_items --sweep-out DIR -n auto \\
        [--sweep-families llama,gpt2] [--sweep-releases 2026.05,2026.09] \\
        [--sweep-tiny] [--sweep-timeout 300] [--sweep-no-layout-checks]

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
        from spyre_adapters.sweep import isolated_triage

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
        target = out / f"{self.family}@{self.release}.json"
        target.write_text(json.dumps([r.to_json() for r in results]), encoding="utf-8")
        for result in results:
            self.user_properties.append(("category", result.category.value))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"sweep {self.family} @ {self.release}"


class _SweepCollector(pytest.Collector):
    def collect(self) -> Iterator[pytest.Item]:
        from spyre_adapters.families import candidate_families
        from spyre_adapters.sweep import default_releases

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
    from spyre_adapters.sweep import SweepReport, default_releases, load_results, write_html

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
    (out / "sweep.json").write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
    write_html(report, out / "sweep.html")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "spyre-adapters sweep")
        for release, counts in report.summary().items():
            reporter.write_line(
                f"{release}: {counts['enabled']} enabled ({counts['native']} native, "
                f"{counts['adapted']} adapted) of {counts['built']} built, {counts['total']} swept"
            )
        reporter.write_line(f"results: {out / 'sweep.json'}, {out / 'sweep.html'}")
