"""Manifest parsing: valid files, and every problem of every broken file, reported at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from spyre_adapters import AdapterKind, ManifestError, Problem, load_manifest, load_manifests
from spyre_adapters.manifest import DEFAULT_ORDER

from .conftest import DATA, FakeCatalogue

BROKEN = DATA / "broken"


def problems_of(path: Path, catalogue: FakeCatalogue) -> list[Problem]:
    with pytest.raises(ManifestError) as info:
        load_manifest(path, catalogue)
    assert all(p.where == str(path) for p in info.value.problems)
    return info.value.problems


def by_key(problems: list[Problem]) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for p in problems:
        table.setdefault(p.key, []).append(p.message)
    return table


def test_valid_tree_loads_with_typed_fields(catalogue: FakeCatalogue) -> None:
    manifests = load_manifests(DATA / "valid", catalogue)
    assert [m.label for m in manifests] == [
        "alpha 1.0",
        "alpha 2.0",
        "beta 1.0",
        "delta 1.0",
        "gamma 1.0",
    ]
    alpha2 = manifests[1]
    assert alpha2.version == Version("2.0")
    assert alpha2.kind is AdapterKind.SCAFFOLDING
    assert alpha2.stacks == SpecifierSet(">=2026.05")
    assert alpha2.gaps == ("sin-cos",)
    assert alpha2.families == ("llama", "mistral")
    assert alpha2.order == 20
    assert alpha2.source == str(DATA / "valid" / "alpha" / "2.0.toml")
    assert len(alpha2.sha256) == 64
    beta = manifests[2]
    assert beta.kind is AdapterKind.PERMANENT
    assert beta.order == DEFAULT_ORDER
    assert beta.retire_by is None
    assert manifests[3].retire_by == "2026.05"


def test_manifest_is_frozen(catalogue: FakeCatalogue) -> None:
    manifest = load_manifest(DATA / "valid" / "beta" / "1.0.toml", catalogue)
    with pytest.raises(AttributeError):
        manifest.name = "other"  # type: ignore[misc]


def test_unknown_keys_suggest_the_right_one(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "unknown-key.toml", catalogue))
    assert table == {
        "retire_after": ["unknown key; did you mean 'retire_by'?"],
        "colour": [
            "unknown key; known keys: schema_version, name, version, kind, summary, gaps, "
            "families, stacks, retire_by, entry_point, order, generated, bridges, after"
        ],
    }


def test_wrong_types_are_all_reported(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "wrong-types.toml", catalogue))
    assert table == {
        "schema_version": ["expected an integer, got '1' (str)"],
        "version": ["expected a string, got 1.0 (float)"],
        "summary": ["must not be empty"],
        "families": ["expected a list of strings, got ['llama', 7] (list)"],
        "gaps": ["expected a list of strings, got 'pow' (str)"],
        "order": ["expected an integer, got True (bool)"],
    }


def test_invalid_version_specifier_name_kind(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "bad-version.toml", catalogue))
    assert table == {
        "name": [
            "'Bad_Name' is not a valid adapter name (lower-case letters, digits and single "
            "hyphens, e.g. 'rope-rotation')"
        ],
        "version": ["'one point oh' is not a PEP 440 version (e.g. '1.0')"],
        "kind": ["'temporary' is not one of 'scaffolding', 'permanent'"],
        "stacks": [
            "'newer than 2026.02' is not a version specifier over releases "
            "(e.g. '>=2026.02,<2026.09')"
        ],
        "entry_point": ["'spyre_fake_adapters relu' is not of the form 'package.module:object'"],
    }


def test_unknown_gap_ids_and_schema_version(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "unknown-gap.toml", catalogue))
    known = ", ".join(sorted(catalogue.gaps))
    assert table == {
        "schema_version": [
            "unsupported schema version 2 (this spyre-adapters reads 1; upgrade "
            "spyre-adapters or rewrite the manifest)"
        ],
        "gaps": [
            "lists 'warp-drive' more than once",
            "unknown gap id 'sin-coss' (did you mean 'sin-cos'?)",
            f"unknown gap id 'warp-drive' (known: {known})",
            f"unknown gap id 'warp-drive' (known: {known})",
        ],
    }


def test_entry_point_that_does_not_import(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "entry-points.toml", catalogue))
    assert table == {
        "entry_point": [
            "'spyre_fake_broken_import:adapter' does not import: ImportError: needs a package "
            "that is not installed: flash_attn"
        ]
    }


def test_entry_point_that_is_not_an_adapter(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "not-adapter.toml", catalogue))
    assert table == {
        "entry_point": [
            "'spyre_fake_adapters:not_an_adapter' is a object, not an adapter: it lacks "
            "matches() and apply() (see spyre_adapters.contract.Adapter)"
        ]
    }


def located(path: Path, catalogue: FakeCatalogue, entry_point: str, tmp_path: Path) -> list[str]:
    """The entry-point problems of ``path`` with ``entry_point``, checked without importing."""
    text = path.read_text(encoding="utf-8")
    start = text.index("entry_point = ")
    edited = tmp_path / path.name
    edited.write_text(text[:start] + f'entry_point = "{entry_point}"\n', encoding="utf-8")
    try:
        load_manifest(edited, catalogue, import_entry_point=False)
    except ManifestError as error:
        return [p.message for p in error.problems]
    return []


def test_entry_points_located_without_importing_them(
    catalogue: FakeCatalogue, tmp_path: Path
) -> None:
    source = BROKEN / "entry-points.toml"
    # not imported: whether the object is an adapter is checked where it runs
    assert located(source, catalogue, "spyre_fake_adapters:not_an_adapter", tmp_path) == []
    assert located(source, catalogue, "spyre_adapters.library.rope:adapter", tmp_path) == []
    assert located(source, catalogue, "spyre_no_such_module:adapter", tmp_path) == [
        "'spyre_no_such_module:adapter' does not import: ModuleNotFoundError: "
        "No module named 'spyre_no_such_module'"
    ]
    assert located(source, catalogue, "spyre_adapters.library.rope:adaptor", tmp_path) == [
        "'spyre_adapters.library.rope:adaptor' does not import: AttributeError: module "
        "'spyre_adapters.library.rope' has no attribute 'adaptor'"
    ]


def test_permanent_with_only_transitional_gaps(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "permanent-transitional.toml", catalogue))
    assert table == {
        "gaps": [
            "a permanent adapter must bridge a lasting gap, but 'pow', 'sin-cos' are all "
            "transitional; make it kind = 'scaffolding'"
        ],
        "retire_by": [
            "a permanent adapter is never retired; remove retire_by = '2026.09' or make the "
            "adapter kind 'scaffolding'"
        ],
    }


def test_scaffolding_with_only_lasting_gaps_and_unknown_retire_by(
    catalogue: FakeCatalogue,
) -> None:
    table = by_key(problems_of(BROKEN / "scaffolding-lasting.toml", catalogue))
    names = ", ".join(r.name for r in catalogue.releases)
    assert table == {
        "gaps": [
            "a scaffolding adapter must bridge a transitional gap, but 'no-inf' is lasting "
            "(never closed, so it could never retire); make it kind = 'permanent'"
        ],
        "retire_by": [f"'2026.13' is not a release of the stack catalogue (known: {names})"],
    }


def test_missing_required_keys(catalogue: FakeCatalogue) -> None:
    table = by_key(problems_of(BROKEN / "missing-keys.toml", catalogue))
    assert table == {
        key: ["required key is missing"]
        for key in ("kind", "summary", "gaps", "families", "stacks", "entry_point")
    }


def test_not_toml(catalogue: FakeCatalogue) -> None:
    (problem,) = problems_of(BROKEN / "not-toml.toml", catalogue)
    assert problem.key == ""
    assert problem.message.startswith("is not valid TOML: ")


def test_layout_must_match_name_and_version(catalogue: FakeCatalogue) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests(DATA / "layout", catalogue)
    where = str(DATA / "layout" / "alpha" / "1.5.toml")
    assert [str(p) for p in info.value.problems] == [
        f"{where}: name: name 'alfa' does not match the folder 'alpha' (expected "
        "'<name>/<version>.toml')",
        f"{where}: version: version '1.0' does not match the file name '1.5.toml' (expected "
        "'<name>/<version>.toml')",
    ]


def test_all_problems_of_all_files_in_one_error(catalogue: FakeCatalogue) -> None:
    files = sorted(BROKEN.glob("*.toml"))
    with pytest.raises(ManifestError) as info:
        load_manifests([*sorted((DATA / "valid").rglob("*.toml")), *files], catalogue)
    error = info.value
    assert {p.where for p in error.problems} == {str(f) for f in files}
    message = str(error)
    assert message.startswith(f"{len(error.problems)} problems in adapter manifests:\n")
    for problem in error.problems:
        assert f"  - {problem}" in message


def test_same_name_and_version_in_two_files(catalogue: FakeCatalogue, tmp_path: Path) -> None:
    source = DATA / "valid" / "beta" / "1.0.toml"
    copy = tmp_path / "beta-copy.toml"
    copy.write_bytes(source.read_bytes())
    with pytest.raises(ManifestError) as info:
        load_manifests([source, copy], catalogue)
    (problem,) = info.value.problems
    assert str(problem) == (
        f"{copy}: version: adapter 'beta' version 1.0 is also declared in {source}"
    )


def test_empty_gaps_and_undecodable_files(catalogue: FakeCatalogue, tmp_path: Path) -> None:
    text = (DATA / "valid" / "beta" / "1.0.toml").read_text()
    no_gaps = tmp_path / "no-gaps.toml"
    no_gaps.write_text(text.replace('gaps = ["stick-align"]', "gaps = []"))
    assert by_key(problems_of(no_gaps, catalogue)) == {
        "gaps": ["must list at least one gap id (an adapter bridges something)"]
    }
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(text.replace("Pad", "P\xe4d").encode("latin-1"))
    (problem,) = problems_of(latin1, catalogue)
    assert problem.message.startswith("is not UTF-8 text: ")


def test_a_stacks_range_that_admits_no_release_is_an_error(catalogue: FakeCatalogue) -> None:
    assert by_key(problems_of(BROKEN / "inverted-range.toml", catalogue)) == {
        "stacks": [
            "'>=2026.09,<2026.05' admits no release at all (>=2026.09 and <2026.05 leave an "
            "empty range); write the lower bound first and below the upper one, e.g. "
            "'>=2026.02,<2026.09'"
        ]
    }


@pytest.mark.parametrize(
    ("stacks", "empty"),
    [
        (">=2026.05,<2026.05", True),
        (">2026.05,<=2026.05", True),
        ("==2026.05,<2026.03", True),
        (">=2026.05,<=2026.05", False),
        (">=2025.12", False),
        ("~=2026.5", False),
    ],
)
def test_empty_ranges(stacks: str, empty: bool, catalogue: FakeCatalogue, tmp_path: Path) -> None:
    text = (DATA / "valid" / "beta" / "1.0.toml").read_text()
    path = tmp_path / "beta.toml"
    path.write_text(text.replace('stacks = ">=2025.12"', f'stacks = "{stacks}"'))
    if empty:
        assert list(by_key(problems_of(path, catalogue))) == ["stacks"]
    else:
        assert str(load_manifest(path, catalogue).stacks) == str(SpecifierSet(stacks))


def test_a_file_outside_the_name_version_layout_is_an_error(
    catalogue: FakeCatalogue, tmp_path: Path
) -> None:
    root = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", root)
    (root / "stray.toml").write_bytes((DATA / "valid" / "beta" / "1.0.toml").read_bytes())
    (root / "beta" / "old").mkdir()
    (root / "beta" / "old" / "0.9.toml").write_text("not toml at all [")
    (root / "README.md").write_text("not a manifest, and not a .toml file: fine\n")
    with pytest.raises(ManifestError) as info:
        load_manifests(root, catalogue)
    problems = [p for p in info.value.problems if "layout" in p.message]
    assert [(p.where, p.key) for p in problems] == [
        (str(root / "beta" / "old" / "0.9.toml"), ""),
        (str(root / "stray.toml"), ""),
    ]
    assert problems[1].message == (
        f"is outside the '<name>/<version>.toml' layout of the manifests folder {root}: move "
        f"it to {root}/<name>/<version>.toml (or out of the folder)"
    )
    # the stray files are read too, so their own problems are reported at once
    assert any(
        p.where.endswith("0.9.toml") and "not valid TOML" in p.message for p in info.value.problems
    )
