"""The CLI through main(argv): output formats, exit codes, pins, waivers, extension hooks.

Runs against the built-in stack catalogue with the test manifests (built-in adapters disabled
through SPYRE_ADAPTERS_DISABLE), so the expectations follow the release timeline of docs/STACK.md §5.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import re
import shutil
import sys
import types
from pathlib import Path

import pytest

from spyre_adapters import build_registry
from spyre_adapters.cli import ExitCode, _main
from spyre_sim.catalogue import builtin_catalogue

from .conftest import DATA, Run, statuses


def test_help_documents_the_exit_codes(run: Run) -> None:
    result = run("--help")
    assert result.code == ExitCode.OK
    for code in ExitCode:
        assert re.search(rf"^  {code.value}  {code.name} ", result.out, re.MULTILINE)
    for command in ("stacks", "list", "show", "audit", "pin", "check"):
        assert re.search(rf"^    {command} ", result.out, re.MULTILINE)


def test_usage_errors_exit_2(run: Run) -> None:
    assert run().code == ExitCode.USAGE
    assert run("audit", "--bogus").code == ExitCode.USAGE
    result = run("audit", "--from", "2026.05")
    assert result.code == ExitCode.USAGE
    assert "--from and --to go together" in result.err
    result = run("audit", "--stack", "2026.04")
    assert result.code == ExitCode.USAGE
    assert "unknown stack release '2026.04'" in result.err
    result = run("show", "omega")
    assert result.code == ExitCode.USAGE
    assert "adapter 'omega' is not registered (registered: alpha, beta, delta, gamma)" in result.err


def test_stacks_json(run: Run) -> None:
    result = run("stacks", "--format", "json")
    assert result.code == ExitCode.OK
    document = result.json()
    assert document["schema_version"] == 1
    releases = {r["name"]: r for r in document["releases"]}
    assert list(releases) == [r.name for r in builtin_catalogue().releases]
    assert releases["2026.08"]["opens"] == ["mem-pool"]
    assert {"mem-pool", "sin-cos"} <= set(releases["2026.09"]["closes"])
    assert "pow" in releases["2026.03"]["closes"]


def test_list_json_names_sources(run: Run) -> None:
    document = run("list", "--format", "json").json()
    assert [(a["name"], a["version"]) for a in document["adapters"]] == [
        ("alpha", "1.0"),
        ("alpha", "2.0"),
        ("beta", "1.0"),
        ("delta", "1.0"),
        ("gamma", "1.0"),
    ]
    assert document["adapters"][0]["source"] == (
        f"plugin 'dir:{DATA / 'valid'}' file {DATA / 'valid' / 'alpha' / '1.0.toml'}"
    )


def test_show_timeline(run: Run) -> None:
    document = run("show", "gamma", "--format", "json").json()
    assert document["adapter"]["gaps"] == ["mem-pool"]
    timeline = {step["release"]: step["status"] for step in document["timeline"]}
    assert timeline["2026.07"] == "retired"
    assert timeline["2026.08"] == "active"
    assert timeline["2026.09"] == "retired"
    alpha = run("show", "alpha", "--version", "1.0", "--format", "json").json()
    assert alpha["adapter"]["version"] == "1.0"
    assert alpha["versions"] == ["1.0", "2.0"]


def test_audit_table_is_plain_and_fixed_width(run: Run) -> None:
    result = run("audit", "--stack", "2026.05", "--today", "2026-11-30")
    assert result.code == ExitCode.OK
    assert "\x1b[" not in result.out
    assert result.out.startswith("Adapters at stack 2026.05")
    assert max(len(line) for line in result.out.splitlines()) <= 120
    assert result.err == ""


def test_audit_json_and_gate(run: Run) -> None:
    result = run("audit", "--stack", "2026.05", "--format", "json", "--today", "2026-11-30")
    document = result.json()
    assert result.code == ExitCode.OK
    assert document["passed"] is True
    assert statuses(document) == {
        "alpha": "2.0 active",
        "beta": "1.0 permanent",
        "delta": "1.0 active",
        "gamma": "1.0 retired",
    }
    delta = next(a for a in document["adapters"] if a["name"] == "delta")
    assert delta["retirable_in"] == "2026.07"
    assert delta["open_gaps"] == ["dtype-cast"]

    overdue = run("audit", "--stack", "2026.06", "--format", "json", "--today", "2026-11-30")
    assert overdue.code == ExitCode.FINDINGS
    assert overdue.json()["findings"] == [
        {
            "adapter": "delta",
            "status": "overdue",
            "message": "delta 1.0 is overdue at 2026.06: 2026.06 is past retire_by 2026.05; "
            "gap still open: dtype-cast; delete it, or add a waiver with a reason and an "
            "expiry date",
        }
    ]
    assert "delta 1.0 is overdue at 2026.06" in overdue.err
    assert "gate failed at stack 2026.06: 1 finding(s)" in overdue.err


def test_audit_with_waivers(run: Run, tmp_path: Path) -> None:
    waivers = tmp_path / "waivers.toml"
    waivers.write_text(
        'schema_version = 1\n[[waiver]]\nadapter = "delta"\n'
        'reason = "dtype-cast closes in 2026.07"\nexpires = 2026-12-31\n'
    )
    args = ("audit", "--stack", "2026.06", "--waivers", str(waivers), "--format", "json")
    held = run(*args, "--today", "2026-12-31")
    assert held.code == ExitCode.OK
    delta = next(a for a in held.json()["adapters"] if a["name"] == "delta")
    assert delta["status"] == "active"
    assert delta["waiver"] == {
        "reason": "dtype-cast closes in 2026.07",
        "expires": "2026-12-31",
        "valid": True,
    }
    assert run(*args, "--today", "2027-01-01").code == ExitCode.FINDINGS
    waivers.write_text('schema_version = 1\n[[waiver]]\nadapter = "delta"\n')
    broken = run(*args)
    assert broken.code == ExitCode.INVALID
    assert f"{waivers}: waiver[0].reason: a waiver needs a non-empty reason" in broken.err


def test_audit_strict_fails_on_dead_scaffolding(run: Run) -> None:
    args = ("audit", "--stack", "2026.09", "--format", "json", "--today", "2026-11-30")
    assert run(*args).code == ExitCode.OK
    strict = run(*args, "--strict")
    assert strict.code == ExitCode.FINDINGS
    assert [f["adapter"] for f in strict.json()["findings"]] == ["alpha", "delta", "gamma"]
    kept = run(*args, "--no-auto-retire")
    assert kept.code == ExitCode.FINDINGS  # delta kept past retire_by is overdue
    assert statuses(kept.json())["alpha"] == "2.0 retirable"


def test_audit_diff(run: Run) -> None:
    result = run("audit", "--from", "2026.07", "--to", "2026.08", "--format", "json")
    assert result.code == ExitCode.OK
    document = result.json()
    assert document["kind"] == "audit-diff"
    assert document["changes"] == [
        {
            "name": "gamma",
            "from": {"version": "1.0", "status": "retired"},
            "to": {"version": "1.0", "status": "active"},
        }
    ]
    table = run("audit", "--from", "2026.07", "--to", "2026.08")
    assert "Changes from stack 2026.07 to 2026.08" in table.out


def test_audit_markdown_to_file(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "audit.md"
    result = run("audit", "--stack", "2026.08", "--format", "markdown", "-o", str(out))
    assert result.code == ExitCode.OK
    assert result.out == ""
    assert result.err == f"spyre-adapters: wrote {out}\n"
    text = out.read_text()
    assert text.startswith("### Adapters at stack 2026.08\n\n| adapter | version |")
    assert re.search(
        r"^\| gamma \| 1\.0 \| active \| mem-pool \| 2026\.09 \| gap still open: mem-pool \|$",
        text,
        re.M,
    )


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: object) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


def test_audit_verify_calls_the_verifier(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from spyre_adapters.enablement import verify

    calls = []
    detail = "aten.sin still falls back in rotary_emb"

    def verify_retirable(report, release, registry):  # type: ignore[no-untyped-def]
        calls.append((report.release, release.name, registry.names()))
        check = verify.FamilyCheck("llama", verify.Evidence.NEEDS_ADAPTER, detail)
        outcome = verify.Outcome.REFUTED
        return [verify.RetirementVerdict("alpha", "1.0", "2026.09", outcome, detail, (check,))]

    monkeypatch.setattr(verify, "verify_retirable", verify_retirable)
    result = run("audit", "--stack", "2026.09", "--verify", "--format", "json")
    assert calls == [("2026.09", "2026.09", ["alpha", "beta", "delta", "gamma"])]
    assert result.code == ExitCode.FINDINGS
    assert result.json()["verification"] == [
        {
            "adapter": "alpha",
            "version": "1.0",
            "release": "2026.09",
            "verified": False,
            "outcome": "refuted",
            "detail": detail,
            "families": [
                {
                    "family": "llama",
                    "preset": "realistic",
                    "evidence": "needs-adapter",
                    "passed": False,
                    "detail": detail,
                }
            ],
            "stand_ins": [],
        }
    ]
    assert f"alpha is not verified retirable (refuted): {detail}" in result.err


def test_extension_subcommands_from_the_table(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = []

    def add_parser(subparsers):  # type: ignore[no-untyped-def]
        subparsers.add_parser("hello", help="greet someone").add_argument("who")

    def run_hello(args):  # type: ignore[no-untyped-def]
        ran.append(args.who)
        return 0

    _fake_module(monkeypatch, "spyre_adapters.cli._hello", add_parser=add_parser, run=run_hello)
    monkeypatch.setitem(_main.SUBCOMMANDS, "hello", False)
    monkeypatch.setitem(_main.SUBCOMMANDS, "ghost", False)  # no module: absent
    assert run("hello", "world").code == ExitCode.OK
    assert ran == ["world"]
    help_text = run("--help").out
    assert re.search(r"^    hello +greet someone$", help_text, re.MULTILINE)
    assert "ghost" not in help_text
    assert run("ghost").code == ExitCode.USAGE


def test_invalid_manifests_exit_3_listing_every_problem(run: Run) -> None:
    result = run("list", manifests=DATA / "broken")
    assert result.code == ExitCode.INVALID
    assert result.out == ""
    count = int(re.search(r"error: (\d+) problems in adapter manifests", result.err).group(1))  # type: ignore[union-attr]
    assert count == result.err.count("\n  - ")
    assert (
        "unknown-gap.toml: gaps: unknown gap id 'sin-coss' (did you mean 'sin-cos'?)" in result.err
    )


class _Terminal:
    """A text stream that says it is a terminal."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    from spyre_adapters.cli._output import TableData, emit

    table = TableData("t", ["adapter", "status"], [["a", "overdue"]], status_column=1)
    colour = re.compile(r"\x1b\[(?:\d+;)*3[0-7](?:;\d+)*m")  # SGR foreground colours
    args = argparse.Namespace(format="table", output=None)
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = _Terminal()
    monkeypatch.setattr(sys, "stdout", coloured)
    emit(args, {}, [table])
    assert colour.search("".join(coloured.parts))
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _Terminal()
    monkeypatch.setattr(sys, "stdout", plain)
    emit(args, {}, [table])
    assert not colour.search("".join(plain.parts))
    assert "overdue" in "".join(plain.parts)


def test_tables_fit_the_width_by_folding_the_columns_that_may_fold() -> None:
    from spyre_adapters.cli._output import TableData, render

    long = "word " * 40
    table = TableData("t", ["name", "text", "more"], [["a-fixed-name", long, long]])
    for width in (40, 80, 120):
        lines = render(table, width=width).splitlines()
        assert max(len(line) for line in lines[1:-1]) <= width  # the grid, not title or caption
        assert "a-fixed-name" in lines[4]  # a column that does not fold keeps its width
    text = " ".join(render(table, width=40).replace("│", " ").split())
    assert text.count("word") == 80  # nothing is cut


def test_list_names_spans_of_releases_and_counts_families(run: Run) -> None:
    from spyre_adapters.cli._list import superseded_text

    registry = build_registry(entry_points=False, plugins=[])
    names = [r.name for r in registry.catalogue.releases]
    assert superseded_text([], registry) == "-"
    assert superseded_text(names, registry) == "every release"
    assert superseded_text([names[0], names[1], names[2], names[5]], registry) == (
        f"{names[0]}-{names[2]}, {names[5]}"
    )
    table = run("list").out
    assert re.search(r"│ alpha\s+│ 2\.0\s+│ \w+\s+│ [^│]+│ [^│]+│ 2\s+│", table), table


def test_audit_with_a_waiver_for_an_adapter_not_installed_exits_3(run: Run, tmp_path: Path) -> None:
    waivers = tmp_path / "waivers.toml"
    waivers.write_text(
        'schema_version = 1\n[[waiver]]\nadapter = "omega"\nreason = "r"\nexpires = 2026-12-31\n'
    )
    result = run("audit", "--stack", "2026.06", "--waivers", str(waivers))
    assert result.code == ExitCode.INVALID
    assert f"{waivers}: waiver[0].adapter: no adapter 'omega' is installed" in result.err


def test_list_and_show_name_superseded_versions_and_hashes(run: Run, tmp_path: Path) -> None:
    newer = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", newer)
    text = (newer / "beta" / "1.0.toml").read_text().replace('version = "1.0"', 'version = "1.1"')
    (newer / "beta" / "1.1.toml").write_text(text)
    listed = run("list", "--format", "json", manifests=newer).json()["adapters"]
    superseded = {f"{a['name']} {a['version']}": a["superseded_at"] for a in listed}
    assert superseded["beta 1.0"] == [r.name for r in builtin_catalogue().releases]
    assert superseded["beta 1.1"] == []
    table = run("list", manifests=newer).out
    # beta 1.0 is never applied: no row of its own, named under "older" on beta 1.1's row
    (beta,) = [line for line in table.splitlines() if re.search(r"│ beta\s+│", line)]
    assert re.search(r"│ 1\.1\s+│.*│ 1\.0\s+│$", beta)
    assert "1 version superseded at every release is named under 'older'" in " ".join(table.split())
    shown = run("show", "beta", "--version", "1.0", "--format", "json", manifests=newer).json()
    assert len(shown["adapter"]["manifest_sha256"]) == 64
    assert len(shown["adapter"]["implementation_sha256"]) == 64
    audit = run("audit", "--stack", "2026.05", manifests=newer).out
    assert re.search(r"beta\s+│ 1\.0\s+│ superseded", audit)
