"""Expected outcomes of an upstream test suite on the device: ``--spyre-expectations FILE``.

Modelled on the upstream-test configuration of the Spyre stack's own CI (modes mandatory
success / xfail / xfail strict / skip, per test): a TOML file says, per test id and release,
what a ``--spyre`` run of a suite nobody here wrote is expected to give, and why. CI then fails
on an **unexpected failure** (a regression) and on an **unexpected pass** (a closed gap or a
fixed adapter: update the file), and passes otherwise::

    schema_version = 1
    default = "pass"            # tests no entry matches: "pass" (must pass) or "any" (not judged)

    [[expect]]
    tests = ["tests/models/*/test_modeling_*.py::*::test_eager_matches_sdpa_inference_*"]
    mode = "xfail-strict"       # pass | xfail | xfail-strict | skip
    class = "precision"         # xfail modes: the failure class expected (gap, precision, miscompile)
    gap = "sdpa-strided"        # optional, for class "gap" or "miscompile": the gap expected
    stacks = ">=2026.05"        # optional: releases the entry holds at (a version specifier)
    numerics = true             # optional: only in runs with numerics on (true) or off (false)
    layout_checks = true        # optional: likewise for layout checks
    reason = "eager and SDPA paths round differently in DL16; the test asks atol 1e-7"

``tests`` holds ``fnmatch`` patterns over node ids. Of the entries that match a test and hold
for the run, the **last** one decides (general entries first, exceptions after them). Modes:

- ``pass``: the test must pass (or skip on its own); a failure is unexpected;
- ``xfail``: the test is expected to fail with that class (and gap); it is then reported as
  xfailed with the reason. Failing with another class is unexpected; passing is reported as
  "now passes" without failing the run;
- ``xfail-strict``: as ``xfail``, but a pass is unexpected (fails the run);
- ``skip``: the test is not run (skipped at setup with the reason), e.g. it needs the network.

Every problem in the file is reported at once, with the file and the key, before any test runs.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from pytest_spyre.record import TestRecord

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["SCHEMA_VERSION", "Expectation", "Expectations", "ExpectationsPlugin", "load"]

SCHEMA_VERSION = 1
MODES = ("pass", "xfail", "xfail-strict", "skip")
EXPECTED_CLASSES = ("gap", "precision", "miscompile")
_KEYS = frozenset(
    {"tests", "mode", "class", "gap", "stacks", "numerics", "layout_checks", "reason"}
)


@dataclass(frozen=True)
class Expectation:
    """One ``[[expect]]`` entry."""

    index: int
    tests: tuple[str, ...]
    mode: str
    cls: str | None
    gap: str | None
    stacks: SpecifierSet | None
    numerics: bool | None
    layout_checks: bool | None
    reason: str

    def holds(self, release: str, numerics: bool, layout_checks: bool) -> bool:
        if self.stacks is not None and not self.stacks.contains(release, prereleases=True):
            return False
        if self.numerics is not None and self.numerics != numerics:
            return False
        return self.layout_checks is None or self.layout_checks == layout_checks

    def matches(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, pattern) for pattern in self.tests)


@dataclass(frozen=True)
class Expectations:
    """A validated expectations file."""

    source: str
    default: str  # "pass" | "any"
    entries: tuple[Expectation, ...]

    def for_test(self, nodeid: str, release: str, numerics: bool,
                 layout_checks: bool) -> Expectation | None:  # fmt: skip
        """The entry that decides ``nodeid`` in this run (the last that matches and holds)."""
        found = None
        for entry in self.entries:
            if entry.holds(release, numerics, layout_checks) and entry.matches(nodeid):
                found = entry
        return found


def load(path: Path) -> Expectations:
    """Read and validate an expectations file; every problem raises one
    :class:`pytest.UsageError` naming the file and each key."""
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise pytest.UsageError(f"--spyre-expectations: cannot read {where}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(f"--spyre-expectations: {where} is not valid TOML: {exc}") from exc
    problems: list[str] = []
    if data.get("schema_version") != SCHEMA_VERSION:
        problems.append(
            f"schema_version: must be {SCHEMA_VERSION} (got {data.get('schema_version')!r})"
        )
    default = data.get("default", "pass")
    if default not in ("pass", "any"):
        problems.append(f"default: must be 'pass' or 'any' (got {default!r})")
    for key in sorted(set(data) - {"schema_version", "default", "expect"}):
        problems.append(f"{key}: unknown key (known: schema_version, default, expect)")
    raw = data.get("expect", [])
    if not isinstance(raw, list):
        problems.append("expect: must be an array of tables ([[expect]])")
        raw = []
    entries = []
    for i, table in enumerate(raw):
        entry = _entry(i, table, problems)
        if entry is not None:
            entries.append(entry)
    if problems:
        listing = "\n".join(f"  - {where}: {p}" for p in problems)
        raise pytest.UsageError(
            f"--spyre-expectations: {len(problems)} problem(s) in {where}:\n{listing}"
        )
    return Expectations(where, str(default), tuple(entries))


def _entry(i: int, table: Any, problems: list[str]) -> Expectation | None:
    key = f"expect[{i}]"
    if not isinstance(table, Mapping):
        problems.append(f"{key}: must be a table")
        return None
    start = len(problems)
    for name in sorted(set(table) - _KEYS):
        problems.append(f"{key}.{name}: unknown key (known: {', '.join(sorted(_KEYS))})")
    tests = table.get("tests")
    if isinstance(tests, str):
        tests = [tests]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t for t in tests):
        problems.append(f"{key}.tests: must be a non-empty list of node-id patterns")
        tests = []
    mode = table.get("mode")
    if mode not in MODES:
        problems.append(f"{key}.mode: must be one of {', '.join(MODES)} (got {mode!r})")
    cls = table.get("class")
    if mode in ("xfail", "xfail-strict"):
        if cls not in EXPECTED_CLASSES:
            problems.append(
                f"{key}.class: an xfail entry names the failure class expected, one of "
                f"{', '.join(EXPECTED_CLASSES)} (got {cls!r})"
            )
    elif cls is not None:
        problems.append(f"{key}.class: only xfail entries have a class (mode is {mode!r})")
    gap = table.get("gap")
    if gap is not None and (not isinstance(gap, str) or cls not in ("gap", "miscompile")):
        problems.append(f"{key}.gap: a gap id string, with class 'gap' or 'miscompile'")
    stacks = None
    if "stacks" in table:
        try:
            stacks = SpecifierSet(str(table["stacks"]))
        except InvalidSpecifier:
            problems.append(f"{key}.stacks: not a version specifier (got {table['stacks']!r})")
    flags: dict[str, bool | None] = {}
    for flag in ("numerics", "layout_checks"):
        value = table.get(flag)
        if value is not None and not isinstance(value, bool):
            problems.append(f"{key}.{flag}: must be true or false (got {value!r})")
            value = None
        flags[flag] = value
    reason = table.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        problems.append(f"{key}.reason: required: say why (a gap, a tolerance, a missing hub)")
    if len(problems) > start:
        return None
    return Expectation(i, tuple(tests), str(mode), cls, gap, stacks, flags["numerics"],
                       flags["layout_checks"], str(reason))  # fmt: skip


class ExpectationsPlugin:
    """Applies an expectations file to a run (see the module docstring)."""

    _KEY = pytest.StashKey[Expectation | None]()

    def __init__(self, expectations: Expectations, release: str, numerics: bool,
                 layout_checks: bool, records: dict[str, TestRecord]) -> None:  # fmt: skip
        self.expectations = expectations
        self.release = release
        self.numerics = numerics
        self.layout_checks = layout_checks
        self.records = records

    @classmethod
    def load(cls, session: Any, records: dict[str, TestRecord]) -> ExpectationsPlugin:
        opts = session.options
        return cls(load(opts.expectations), session.release.name, opts.numerics,
                   opts.layout_checks, records)  # fmt: skip

    def _entry(self, item: pytest.Item) -> Expectation | None:
        return self.expectations.for_test(item.nodeid, self.release, self.numerics,
                                          self.layout_checks)  # fmt: skip

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        entry = self._entry(item)
        item.stash[self._KEY] = entry
        if entry is not None and entry.mode == "skip":
            self._verdict(item, "skipped as expected")
            pytest.skip(f"spyre expectations: {entry.reason}")

    def _verdict(self, item: pytest.Item, verdict: str) -> None:
        from pytest_spyre.recorder import RECORD_KEY

        record = item.stash.get(RECORD_KEY, None)
        if record is not None and (record.expectation is None or verdict.startswith("unexpected")):
            record.expectation = verdict

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report: pytest.TestReport = yield
        if call.when not in ("setup", "call") or hasattr(report, "wasxfail"):
            return report
        entry = item.stash.get(self._KEY, None)
        mode = "pass" if entry is None else entry.mode
        if entry is None and self.expectations.default == "any":
            return report
        if mode == "skip":
            return report
        from pytest_spyre.recorder import RECORD_KEY

        record = item.stash.get(RECORD_KEY, None)
        failure = record.failure if record is not None else None
        where = f"expectations {self.expectations.source}" + (
            f", entry expect[{entry.index}]" if entry is not None else ", default 'pass'"
        )
        if report.failed:
            if entry is not None and mode in ("xfail", "xfail-strict") and failure is not None \
                    and failure.cls == entry.cls and (entry.gap is None or failure.gap == entry.gap):  # fmt: skip
                report.outcome = "skipped"
                report.wasxfail = f"spyre expected {entry.cls} failure: {entry.reason}"
                self._verdict(item, "failed as expected")
                return report
            got = f"{failure.cls}: {failure.detail}" if failure is not None else "a failure"
            wanted = (
                "to pass" if mode == "pass"
                else f"to fail with class {entry.cls}" + (f" (gap {entry.gap})" if entry and entry.gap else "")  # type: ignore[union-attr]
            )  # fmt: skip
            report.sections.append(("spyre expectations",
                                    f"unexpected failure ({where}): expected {wanted}, got {got}"))  # fmt: skip
            self._verdict(item, "unexpected failure")
        elif report.passed and call.when == "call":
            if mode == "xfail-strict":
                assert entry is not None
                report.outcome = "failed"
                report.longrepr = (
                    f"[unexpected pass] {where}: expected to fail with class {entry.cls} "
                    f"({entry.reason}), but the test passed: the gap may be closed or bridged "
                    "now; update the expectations file"
                )
                self._verdict(item, "unexpected pass")
            elif mode == "xfail":
                self._verdict(item, "now passes")
            else:
                self._verdict(item, "passed as expected")
        return report


def entries_from_report(report: Mapping[str, Any], release: str,
                        numerics: bool) -> list[dict[str, Any]]:  # fmt: skip
    """``[[expect]]`` tables (as dicts) for every failing test of a ``--spyre-report``: a
    starting point a person reviews, never a file to commit unread. A gap or miscompile is
    ``xfail-strict`` (the day it closes, the run says so); a precision failure is ``xfail``
    (how far a DL16 result lands from an fp32 tolerance can change with any rounding); any
    other class is a defect to fix, written as ``skip`` with its detail so it stands out."""
    out = []
    for test in report.get("tests", []):
        failure = test.get("failure")
        if test.get("outcome") not in ("failed", "error") or not failure:
            continue
        cls = failure["class"]
        entry: dict[str, Any] = {"tests": [test["nodeid"]], "stacks": f"=={release}",
                                 "numerics": numerics}  # fmt: skip
        if cls in EXPECTED_CLASSES:
            entry["mode"] = "xfail" if cls == "precision" else "xfail-strict"
            entry["class"] = cls
            if failure.get("gap") is not None:
                entry["gap"] = failure["gap"]
        else:
            entry["mode"] = "skip"
        entry["reason"] = f"{cls}: {failure['detail']}"
        out.append(entry)
    return out


def write_entries(reports: list[Path], output: Path) -> int:
    """Write a reviewable expectations file from ``--spyre-report`` files (one per release);
    returns the number of entries. ``python -m pytest_spyre.expectations REPORT... -o FILE``."""
    import json

    import tomli_w

    entries: list[dict[str, Any]] = []
    for path in reports:
        data = json.loads(path.read_text(encoding="utf-8"))
        release = data["stack"]["release"]
        entries += entries_from_report(data, release, bool(data["settings"]["numerics"]))
    document = {"schema_version": SCHEMA_VERSION, "default": "pass", "expect": entries}
    output.write_text(
        "# Expected outcomes under pytest --spyre (pytest_spyre.expectations): written from\n"
        "# --spyre-report files, then reviewed. Every entry says why.\n" + tomli_w.dumps(document),
        encoding="utf-8",
    )
    return len(entries)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m pytest_spyre.expectations",
        description="Write an expectations file from --spyre-report JSON files (to review).",
    )
    parser.add_argument("reports", nargs="+", type=Path, help="--spyre-report files")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the TOML file")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.reports if not p.is_file()]
    if missing:
        parser.error(f"no such report: {', '.join(missing)}")
    if not args.output.parent.resolve().is_dir():
        parser.error(f"the directory of {args.output} does not exist")
    count = write_entries(args.reports, args.output)
    print(f"{count} entries written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
