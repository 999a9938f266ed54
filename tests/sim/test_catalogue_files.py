"""User release files and catalogue directories: loading, extending, and every validation rule."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spyre_sim.catalogue import (
    Catalogue,
    Decision,
    GapState,
    builtin_catalogue,
    catalogue_for,
    load_release_file,
    resolve_stack,
)
from spyre_sim.errors import CatalogueError

DATA = Path(__file__).resolve().parents[1] / "data" / "releases"
VALID = "2025.12, 2026.02, 2026.03, 2026.05, 2026.06, 2026.07, 2026.08, 2026.09"
NEW_OP_HINT = (
    'a new op needs a full table rule with a note, e.g. {{decision = "native", note = "why"}} '
    "(check the spelling)"
)


def texts(error: CatalogueError) -> list[str]:
    """The problems of ``error`` as shown (``<file>: <key>: <what> (got <value>)``)."""
    return [str(p) for p in error.problems]


# Every broken file and the exact problems it must produce ({file} is the path given).
BROKEN: dict[str, list[str]] = {
    "broken-base.toml": [
        "{file}: release.base: unknown base release; valid releases: " + VALID + ' (got "2026.10")',
    ],
    "broken-duplicate.toml": [
        "{file}: release.name: a release with this name already exists in the catalogue ("
        + VALID
        + '); choose a new name (got "2026.5")',
    ],
    "broken-inconsistent.toml": [
        '{file}: ops."aten.cumsum": decision "cpu-fallback" names gap "cumsum", which is closed '
        'at 2026.11; update the op or the gap state (got "cpu-fallback")',
    ],
    "broken-missing.toml": [
        "{file}: schema_version: missing; write schema_version = 2 (got nothing)",
        "{file}: release: missing [release] table with name, base, date, summary (got nothing)",
    ],
    "broken-new-op.toml": [
        '{file}: ops."aten.cumsun": op not known to base release 2026.09; '
        + NEW_OP_HINT
        + ' (got "native")',
        '{file}: ops."aten.logcumsumexp": op not known to base release 2026.09; '
        + NEW_OP_HINT
        + ' (got {{decision = "native"}})',
    ],
    "broken-no-base.toml": [
        "{file}: release.base: a user release must extend a release of the catalogue ("
        + VALID
        + ") (got nothing)",
    ],
    "broken-order.toml": [
        '{file}: release.name: a release must sort after its base 2026.09 (got "2026.01")',
        "{file}: release.date: a release cannot predate its base 2026.09 (2026-09-25) "
        "(got 2026-01-20)",
    ],
    "broken-version.toml": [
        '{file}: release.name: a release name must be a version such as "2026.11" (got "next")',
    ],
    "broken-tables.toml": [
        '{file}: release: must be a table (got "2026.11")',
        '{file}: gaps: must be a table (got ["cumsum"])',
        '{file}: ops."aten.cumsum": unknown decision; one of native, decomposed, cpu-fallback, '
        'unsupported, miscompiled (got "quick")',
    ],
    "broken-types.toml": [
        "{file}: schema_version: unsupported schema version; this loader reads 1 and 2 (got 99)",
        "{file}: extra: unknown key; allowed: gaps, ops, release, schema_version (got true)",
        "{file}: release.author: unknown key; allowed: base, date, name, summary, upstream "
        '(got "someone")',
        "{file}: release.name: must be a string (got 2026)",
        "{file}: release.summary: missing (got nothing)",
        '{file}: release.date: not a date; write YYYY-MM-DD (got "2026-13-01")',
        "{file}: gaps.cumsum: a gap state must be a string (got 1)",
        '{file}: ops."aten.cumsum": an op rule is a decision string or a table (got 3)',
    ],
    "broken-rules.toml": [
        "{file}: release.date: must be a date such as 2026-05-29 (got 2026-11-20T10:00:00)",
        "{file}: gaps.cumsum: unknown gap state; one of open, fallback, miscompiled, closed "
        '(got "half-open")',
        '{file}: ops."aten.cumsum": unknown decision; one of native, decomposed, cpu-fallback, '
        'unsupported, miscompiled (got "fast")',
        '{file}: ops."aten.argmax": decision "cpu-fallback" must name the gap it belongs to; '
        'write {{decision = "cpu-fallback", gap = "...", note = "..."}} (got "cpu-fallback")',
        '{file}: ops."aten.sin".gap: a native op lowers, so it names no gap; remove gap '
        '(got "sin-cos")',
        '{file}: ops."aten.tril".reason: unknown key; allowed: decision, gap, note, source '
        '(got "x")',
        '{file}: ops."aten.sort".decision: missing (got nothing)',
        '{file}: ops."not an op": not an ATen op name like "aten.sin" or "aten.add.Tensor" '
        '(got "not an op")',
        '{file}: gaps.no-such-gap: unknown gap id; known gaps: {known} (got "no-such-gap")',
        '{file}: gaps.stick-align: a lasting gap is never closed (got "closed")',
        '{file}: ops."aten.isin".gap: unknown gap id (did you mean "isin"?); known gaps: {known} '
        '(got "isin-gap")',
    ],
}


def _expected(name: str, file: str) -> list[str]:
    known = ", ".join(sorted(builtin_catalogue().gaps))
    return [line.format(file=file, known=known) for line in BROKEN[name]]


def test_every_broken_file_is_listed() -> None:
    on_disk = sorted(p.name for p in DATA.glob("broken-*.toml"))
    assert on_disk == sorted([*BROKEN, "broken-syntax.toml"])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_file_reports_every_problem(name: str) -> None:
    path = DATA / name
    with pytest.raises(CatalogueError) as info:
        load_release_file(path)
    assert texts(info.value) == _expected(name, str(path))
    count = len(texts(info.value))
    assert str(info.value).startswith(f"{count} problem{'s' if count != 1 else ''} in ")
    for problem in texts(info.value):
        assert problem in str(info.value)


def test_broken_syntax_names_file_and_position() -> None:
    path = DATA / "broken-syntax.toml"
    with pytest.raises(CatalogueError) as info:
        load_release_file(path)
    (problem,) = texts(info.value)
    assert problem.startswith(f"{path}: is not valid TOML: ")
    assert "line 2" in problem


def test_missing_file_is_a_catalogue_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(CatalogueError) as info:
        resolve_stack(path)
    (problem,) = texts(info.value)
    assert problem.startswith(f"{path}: cannot be read: ")


def test_user_release_extends_2026_09_with_cumsum_native() -> None:
    path = DATA / "whatif-2026.11.toml"
    release = load_release_file(path)
    base = builtin_catalogue().release("2026.09")
    assert (release.name, release.base, release.source) == ("2026.11", "2026.09", str(path))
    assert release.op_rule("aten.cumsum").decision is Decision.NATIVE
    assert release.gap_state("cumsum") is GapState.CLOSED
    assert base.op_rule("aten.cumsum").decision is Decision.FALLBACK  # the base is untouched
    # everything else is inherited
    assert release.op_rule("aten.tril") == base.op_rule("aten.tril")
    assert dict(release.gap_states) == {**base.gap_states, "cumsum": GapState.CLOSED}
    # a new op with a full rule
    assert release.op_rule("aten.logcumsumexp").decision is Decision.NATIVE
    assert "aten.logcumsumexp" not in base.op_rules


def test_catalogue_with_release_file_and_first_closing() -> None:
    builtin = builtin_catalogue()
    extended = builtin.with_release_file(DATA / "whatif-2026.11.toml")
    assert extended.names[-1] == "2026.11"
    assert extended.newest.name == "2026.11"
    assert extended.first_closing("cumsum", "2026.05") == "2026.11"
    assert builtin.first_closing("cumsum", "2026.05") is None
    assert "2026.11" not in builtin
    # a second user release can extend the first one
    with pytest.raises(CatalogueError, match="already exists"):
        extended.with_release_file(DATA / "whatif-2026.11.toml")


def test_catalogue_for_a_user_release_sees_its_own_closings() -> None:
    release = resolve_stack(DATA / "whatif-2026.11.toml")
    catalogue = catalogue_for(release)
    assert catalogue.first_closing("cumsum", release.name) == "2026.11"
    assert catalogue_for(builtin_catalogue().release("2026.05")) is builtin_catalogue()
    assert catalogue_for(release) is catalogue


def test_overload_rule_in_a_user_file_beats_the_packet() -> None:
    release = load_release_file(DATA / "overload-2026.10.toml")
    assert release.op_rule("aten.pow", "Scalar").decision is Decision.FALLBACK
    assert release.op_rule("aten.pow", "Tensor_Scalar").decision is Decision.DECOMPOSED
    assert release.date.isoformat() == "2026-10-16"  # dates may also be strings


def test_resolve_stack_by_name_path_pathlike_and_release() -> None:
    path = DATA / "whatif-2026.11.toml"
    by_path = resolve_stack(str(path))
    assert resolve_stack(path) is by_path  # cached while the file is unchanged
    assert resolve_stack(by_path) is by_path
    assert resolve_stack("2026.05") is builtin_catalogue().release("2026.05")


def test_resolve_stack_reloads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    shutil.copy(DATA / "whatif-2026.11.toml", path)
    first = resolve_stack(path)
    text = path.read_text().replace('"aten.cumsum" = "native"', '"aten.cumsum" = "decomposed"')
    path.write_text(text + "\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = resolve_stack(path)
    assert first.op_rule("aten.cumsum").decision is Decision.NATIVE
    assert second.op_rule("aten.cumsum").decision is Decision.DECOMPOSED


# --------------------------------------------------------------------- whole catalogues

GAPS = """
schema_version = 1
[gaps.unlowered-op]
title = "t"
nature = "transitional"
description = "d"
[gaps.hw]
title = "t"
nature = "lasting"
description = "d"
"""


def _release(name: str, base: str | None, date: str, extra: str = "") -> str:
    base_line = f'base = "{base}"\n' if base else ""
    return (
        f'schema_version = 1\n[release]\nname = "{name}"\n{base_line}date = {date}\n'
        f'summary = "s"\n{extra}'
    )


FIRST_GAPS = '[gaps]\nunlowered-op = "open"\nhw = "open"\n'


def _write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_builtin_data_loads_from_a_directory() -> None:
    source = Path(builtin_catalogue().newest.source).parent
    catalogue = Catalogue.from_directory(source)
    assert catalogue.names == builtin_catalogue().names


def test_directory_catalogue_minimal(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "gaps.toml": GAPS,
            "1.0.toml": _release("1.0", None, "2026-01-01", FIRST_GAPS),
            "1.1.toml": _release("1.1", "1.0", "2026-02-01"),
        },
    )
    catalogue = Catalogue.from_directory(tmp_path)
    assert catalogue.names == ("1.0", "1.1")
    assert catalogue.timeline("hw") == [("1.0", GapState.OPEN), ("1.1", GapState.OPEN)]


def test_directory_with_cycle_and_duplicates(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "gaps.toml": GAPS,
            "1.0.toml": _release("1.0", None, "2026-01-01", FIRST_GAPS),
            "a.toml": _release("2.0", "3.0", "2026-01-01"),
            "b.toml": _release("3.0", "2.0", "2026-01-01"),
            "c.toml": _release("1.0", None, "2026-01-01", FIRST_GAPS),
        },
    )
    with pytest.raises(CatalogueError) as info:
        Catalogue.from_directory(tmp_path)
    a, b, c = (str(tmp_path / n) for n in ("a.toml", "b.toml", "c.toml"))
    assert texts(info.value) == [
        f'{c}: release.name: duplicate release name, also in {tmp_path / "1.0.toml"} (got "1.0")',
        f'{a}: release.name: a release must sort after its base 3.0 (got "2.0")',
        f'{a}: release.base: releases extend each other in a cycle 2.0 -> 3.0 -> 2.0 (got "3.0")',
    ]
    assert b not in str(info.value)  # one report per cycle


def test_directory_first_release_must_state_every_gap(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "gaps.toml": GAPS,
            "1.0.toml": _release("1.0", None, "2026-01-01", '[gaps]\nunlowered-op = "open"\n'),
            "1.1.toml": _release("1.1", "0.9", "2026-02-01", '[gaps]\nhw = "closed"\n'),
        },
    )
    with pytest.raises(CatalogueError) as info:
        Catalogue.from_directory(tmp_path)
    first, second = str(tmp_path / "1.0.toml"), str(tmp_path / "1.1.toml")
    assert texts(info.value) == [
        f'{second}: gaps.hw: a lasting gap is never closed (got "closed")',
        f"{first}: gaps: the first release must give the state of every gap; missing: hw "
        f'(got ["unlowered-op"])',
        f'{second}: release.base: unknown base release; valid releases: 1.0, 1.1 (got "0.9")',
    ]


def test_directory_gaps_file_is_validated(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "gaps.toml": 'schema_version = 1\n[gaps.Bad_Id]\ntitle = "t"\n'
            '[gaps.x]\ntitle = "t"\nnature = "forever"\ndescription = "d"\nops = ["sin"]\n',
            "1.0.toml": _release("1.0", None, "2026-01-01", '[gaps]\nx = "open"\n'),
        },
    )
    with pytest.raises(CatalogueError) as info:
        Catalogue.from_directory(tmp_path)
    gaps = str(tmp_path / "gaps.toml")
    assert texts(info.value) == [
        f"{gaps}: gaps.Bad_Id: a gap id is lower-case words joined by '-' (got \"Bad_Id\")",
        f"{gaps}: gaps.x.nature: unknown nature; one of transitional, lasting, regression "
        f'(got "forever")',
        f'{gaps}: gaps.x.ops: not an ATen op name like "aten.sin" (got "sin")',
        f'{gaps}: gaps: the catch-all gap "unlowered-op" must be defined (got nothing)',
        f'{tmp_path / "1.0.toml"}: gaps.x: unknown gap id; known gaps: (none) (got "x")',
    ]


def test_resolve_stack_accepts_a_file_name_without_suffix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(DATA / "whatif-2026.11.toml", tmp_path / "whatif")
    monkeypatch.chdir(tmp_path)
    assert resolve_stack("whatif").name == "2026.11"


# --------------------------------------------------------------------- schema 2: provenance

PROVENANCE = """schema_version = 2

[release]
name = "2026.11"
base = "2026.09"
date = 2026-11-20
summary = "2026.09 + cumsum on the device"

[release.upstream]
from = 2026-09-26
to = 2026-11-20
sources = ["#9999"]
commits = [{ sha = "abcdef0", date = 2026-10-01, source = "#9998" }]

[gaps]
cumsum = { state = "closed", source = "#3389", note = "the scan kernel" }

[ops]
"aten.cumsum" = { decision = "native", source = ["#3389", "docs/STACK.md §8"] }
"""


def test_a_schema_2_user_release_carries_its_provenance(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(PROVENANCE)
    release = load_release_file(path)
    assert release.upstream is not None
    assert (release.upstream.start.isoformat(), release.upstream.end.isoformat()) == (
        "2026-09-26",
        "2026-11-20",
    )
    assert [c.sha for c in release.upstream.commits] == ["abcdef0"]
    assert release.gap_sources["cumsum"] == ("#3389",)
    assert release.gap_notes["cumsum"] == "the scan kernel"
    assert release.op_rule("aten.cumsum").source == ("#3389", "docs/STACK.md §8")
    assert release.own_gaps == frozenset({"cumsum"})
    assert release.own_ops == frozenset({"aten.cumsum"})
    assert release.delta_sources == ("#9999", "#3389", "docs/STACK.md §8")
    # inherited lines keep the source of the release that set them
    assert (
        release.op_rule("aten.sin").source == builtin_catalogue().newest.op_rule("aten.sin").source
    )
    # the catalogue extended by it resolves its commit
    extended = builtin_catalogue().with_release_file(path)
    found = extended.commit("abcdef0")
    assert found is not None
    assert found[0].name == "2026.11"


def test_schema_2_problems_are_all_reported_with_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        PROVENANCE.replace("from = 2026-09-26", "from = 2026-09-01")
        .replace("to = 2026-11-20", "to = 2026-11-19")
        .replace('sources = ["#9999"]', 'sources = ["PR 9999"]')
        .replace('sha = "abcdef0", date = 2026-10-01', 'sha = "XYZ", date = 2026-12-01')
        .replace('source = "#3389", note', "source = 3389, note")
        .replace(
            '{ sha = "XYZ", date = 2026-12-01, source = "#9998" }',
            '{ sha = "XYZ", date = 2026-12-01 }',
        )
    )
    with pytest.raises(CatalogueError) as info:
        load_release_file(path)
    file = str(path)
    forms = (
        'a source is "#1234" (a torch-spyre PR or issue), "owner/repo#12" (another repository) '
        'or "docs/STACK.md §5" (a section of this project\'s stack description)'
    )
    assert texts(info.value) == [
        f'{file}: release.upstream.sources: not a source; {forms} (got "PR 9999")',
        f"{file}: release.upstream.to: the upstream range ends on the release date (2026-11-20) "
        "(got 2026-11-19)",
        f"{file}: release.upstream.commits[0].sha: a commit is 7 to 40 lower-case hex digits "
        '(got "XYZ")',
        f"{file}: release.upstream.commits[0].source: missing; say where the commit was seen "
        "(got nothing)",
        f"{file}: release.upstream.commits[0].date: the commit lies outside the upstream range "
        "2026-09-01..2026-11-19 (got 2026-12-01)",
        f"{file}: gaps.cumsum.source: must be a string or a list of strings; {forms} (got 3389)",
        f"{file}: release.upstream.from: the range must start after the range of its base "
        "2026.09 (2026-08-29..2026-09-25) (got 2026-09-01)",
    ]


def test_a_schema_1_file_may_not_use_the_provenance_keys(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(PROVENANCE.replace("schema_version = 2", "schema_version = 1"))
    with pytest.raises(CatalogueError) as info:
        load_release_file(path)
    needs = "needs schema_version = 2 (the provenance keys are new in version 2)"
    assert [p.split(": ", 2)[1] for p in texts(info.value)] == [
        "release.upstream",
        "gaps.cumsum",
        'ops."aten.cumsum".source',
    ]
    assert all(needs in p for p in texts(info.value))
