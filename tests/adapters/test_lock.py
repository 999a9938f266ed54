"""Pins: writing, updating, reading, and detecting stale and tampered locks."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shutil
import tokenize
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from spyre_adapters import (
    Lock,
    LockError,
    Registry,
    UnknownAdapterError,
    check_lock,
    pin,
    read_lock,
    write_lock,
)
from spyre_adapters.implementation import code_of, comment_spans
from spyre_adapters.lock import implementation_sha256, pinned_manifests

from .conftest import DATA, FakeCatalogue


@pytest.fixture
def copied(tmp_path: Path, catalogue: FakeCatalogue) -> tuple[Path, Registry]:
    """A registry loaded from a copy of the valid manifests (so a test may edit them)."""
    root = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", root)
    reg = Registry(catalogue)
    reg.load_directory(root)
    return root, reg


def test_pin_records_the_resolved_set_with_hashes(registry: Registry, tmp_path: Path) -> None:
    lock = pin(registry, "2026.08")
    entry = lock.entry("2026.08")
    assert entry.auto_retire is True
    assert [(p.name, str(p.version)) for p in entry.adapters] == [
        ("alpha", "2.0"),
        ("beta", "1.0"),
        ("gamma", "1.0"),
    ]
    alpha = registry.get("alpha", "2.0")
    assert entry.adapters[0].manifest_sha256 == alpha.sha256
    assert entry.adapters[0].implementation_sha256 == implementation_sha256(alpha)
    # a single-module implementation outside the project: sha256 over (module name, NUL,
    # sha256 of its bytes)
    impl = (DATA / "impl" / "spyre_fake_adapters.py").read_bytes()
    expected = hashlib.sha256(b"spyre_fake_adapters\0" + hashlib.sha256(impl).digest())
    assert implementation_sha256(alpha) == expected.hexdigest()


def test_write_read_round_trip_keeps_other_releases(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "spyre-adapters.lock"
    write_lock(pin(registry, "2026.05"), path)
    write_lock(pin(registry, "2026.09", lock=read_lock(path)), path)
    write_lock(pin(registry, "2026.05", auto_retire=False, lock=read_lock(path)), path)
    lock = read_lock(path)
    assert sorted(lock.entries) == ["2026.05", "2026.09"]
    assert lock.entry("2026.05").auto_retire is False
    assert [p.name for p in lock.entry("2026.09").adapters] == ["beta"]
    assert lock == dataclasses.replace(
        pin(registry, "2026.05", auto_retire=False, lock=pin(registry, "2026.09")),
        source=str(path),
    )
    assert [p.name for p in tmp_path.iterdir()] == ["spyre-adapters.lock"]  # no temp files left
    assert check_lock(lock, registry) == []


def test_stale_when_resolution_changes(
    copied: tuple[Path, Registry], catalogue: FakeCatalogue
) -> None:
    _root, reg = copied
    lock = pin(reg, "2026.05")
    # a new alpha version for 2026.05 and later, and beta no longer admits 2026.05
    newer = Registry(catalogue)
    for manifest in reg.manifests():
        if manifest.name == "beta":
            manifest = dataclasses.replace(manifest, stacks=SpecifierSet(">=2026.06"))
        newer.add(manifest)
    newer.add(dataclasses.replace(reg.get("gamma"), name="zeta", gaps=("sin-cos",)))
    findings = check_lock(lock, newer)
    assert [str(f) for f in findings] == [
        'releases."2026.05" beta: stale: the lock pins beta 1.0, which resolution no longer applies',
        'releases."2026.05" zeta: stale: resolution now applies zeta 1.0, which the lock does '
        "not pin",
    ]
    assert all(f.failing for f in findings)
    uninstalled = Registry(catalogue)
    uninstalled.add_all(m for m in reg.manifests() if m.name != "beta")
    assert [str(f) for f in check_lock(lock, uninstalled)] == [
        'releases."2026.05" beta: stale: pinned version 1.0 is not installed (it was provided '
        "by -; reinstall it, or re-pin)",
    ]


def test_a_newer_version_supersedes_a_pin_without_failing(
    registry: Registry, catalogue: FakeCatalogue
) -> None:
    lock = pin(registry, "2026.05")
    newer = Registry(catalogue)
    newer.add_all(registry.manifests())
    newer.add(dataclasses.replace(registry.get("alpha"), version=Version("2.1")))
    findings = check_lock(lock, newer)
    assert [str(f) for f in findings] == [
        'releases."2026.05" alpha: superseded: pinned 2.0; 2.1 supersedes it at 2026.05 '
        "(`spyre-adapters pin --upgrade alpha` moves the pin)",
    ]
    assert not findings[0].failing
    assert findings[0].newer == Version("2.1")
    # the pinned version is still what a run under the lock applies
    assert ("alpha", Version("2.0")) in [m.key for m in pinned_manifests(lock, newer, "2026.05")]


def test_tampered_manifest_and_implementation(
    copied: tuple[Path, Registry], catalogue: FakeCatalogue, tmp_path: Path
) -> None:
    root, reg = copied
    lock = pin(reg, "2026.05")
    beta_file = root / "beta" / "1.0.toml"
    beta_file.write_text(beta_file.read_text().replace("whole sticks", "whole sticks (edited)"))
    reloaded = Registry(catalogue)
    reloaded.load_directory(root)
    lock = dataclasses.replace(
        lock,
        entries={
            "2026.05": dataclasses.replace(
                lock.entry("2026.05"),
                adapters=tuple(
                    dataclasses.replace(p, implementation_sha256="0" * 64)
                    if p.name == "delta"
                    else p
                    for p in lock.entry("2026.05").adapters
                ),
            )
        },
    )
    findings = check_lock(lock, reloaded)
    assert [(f.adapter, f.kind) for f in findings] == [("beta", "tampered"), ("delta", "tampered")]
    beta = reloaded.get("beta")
    assert findings[0].message == (
        f"manifest {beta_file} hashes to {beta.sha256[:12]}..., the lock recorded "
        f"{reg.get('beta').sha256[:12]}..."
    )
    delta = reloaded.get("delta")
    assert findings[1].message == (
        f"implementation spyre_fake_adapters:tag_b hashes to "
        f"{implementation_sha256(delta)[:12]}..., the lock recorded 000000000000..."
    )
    with pytest.raises(LockError) as info:
        pinned_manifests(lock, reloaded, "2026.05")
    assert [p.key for p in info.value.problems] == [
        'releases."2026.05" beta',
        'releases."2026.05" delta',
    ]
    assert info.value.problems[0].message.endswith(
        "re-pin with `spyre-adapters pin --stack 2026.05` after reviewing the change"
    )


def test_pinned_set_is_used_exactly(registry: Registry) -> None:
    lock = pin(registry, "2026.05", auto_retire=False)
    assert [m.name for m in pinned_manifests(lock, registry, "2026.05")] == [
        "gamma",
        "alpha",
        "beta",
        "delta",
    ]


def test_release_missing_from_lock(registry: Registry) -> None:
    lock = pin(registry, "2026.05")
    with pytest.raises(LockError) as info:
        lock.entry("2026.06")
    assert str(info.value.problems[0]) == (
        'lock: releases."2026.06": no adapters are pinned for stack 2026.06 (pinned: 2026.05); '
        "run `spyre-adapters pin --stack 2026.06`"
    )


def test_malformed_lock_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.lock"
    path.write_text(
        'schema_version = 7\nextra = 1\n[releases."2026.05"]\nauto_retire = "yes"\n'
        'adapters = [{ name = "a", version = "x y", manifest_sha256 = "1" }]\n'
    )
    with pytest.raises(LockError) as info:
        read_lock(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}: extra: unknown key (expected schema_version, releases)",
        f"{path}: schema_version: expected 2, got 7",
        f"{path}: releases.\"2026.05\".auto_retire: expected true or false, got 'yes'",
        f'{path}: releases."2026.05".adapters[0].implementation_sha256: expected a string, got None',
        f"{path}: releases.\"2026.05\".adapters[0].version: 'x y' is not a PEP 440 version",
    ]


def test_lock_file_is_toml_with_schema_version(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    write_lock(pin(registry, "2026.02"), path)
    text = path.read_text()
    assert "schema_version = 2\n" in text
    assert '[releases."2026.02"]' in text
    assert isinstance(read_lock(path), Lock)


def test_a_failed_write_leaves_the_old_lock(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spyre-adapters.lock"
    write_lock(pin(registry, "2026.05"), path)
    before = path.read_bytes()

    def fail(src: str, dst: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("spyre_adapters.lock.os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_lock(pin(registry, "2026.09"), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["spyre-adapters.lock"]


def test_implementation_hash_covers_shared_modules_of_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit to a private module an adapter imports is a change of the implementation."""
    import types
    from typing import cast

    from spyre_adapters.lock import implementation_sha256, implementation_sources
    from spyre_adapters.manifest import Manifest

    package = tmp_path / "lockhash_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_shared.py").write_text("FACTOR = 2\n")
    (package / "unrelated.py").write_text("X = 1\n")
    entry = package / "adapter.py"
    entry.write_text("import json\nfrom ._shared import FACTOR\nadapter = FACTOR\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    names = [name for name, _ in implementation_sources("lockhash_pkg.adapter", entry)]
    assert names == ["lockhash_pkg._shared", "lockhash_pkg.adapter"]

    fake = types.SimpleNamespace(
        entry_point="lockhash_pkg.adapter:adapter", implementation_file=lambda: entry
    )
    manifest = cast(Manifest, fake)
    before = implementation_sha256(manifest)
    (package / "unrelated.py").write_text("X = 2\n")
    assert implementation_sha256(manifest) == before
    (package / "_shared.py").write_text("FACTOR = 3\n")
    assert implementation_sha256(manifest) != before


def test_lock_round_trips_through_the_toml_writer(registry: Registry, tmp_path: Path) -> None:
    """Written with tomli-w, read back with tomllib: the same lock, whatever the strings hold."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from spyre_adapters.lock import LockEntry, PinnedAdapter, dump_lock, parse_lock

    odd = PinnedAdapter(
        "alpha",
        Version("2.0"),
        "a" * 64,
        "b" * 64,
        distribution='acme "quoted"\nnewline \\ back\tslash',
        distribution_version="1.0+local",
    )
    lock = pin(registry, "2026.05").with_entry(LockEntry("2026.09", False, (odd,)))
    text = dump_lock(lock)
    assert parse_lock(tomllib.loads(text), where="x") == dataclasses.replace(lock, source="x")
    path = tmp_path / "x.lock"
    write_lock(lock, path)
    assert read_lock(path).entries == lock.entries


def test_lock_tables_are_validated_with_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.lock"
    pinned = 'name = "alpha"\nversion = "2.0"\nmanifest_sha256 = "a"\nimplementation_sha256 = "b"\n'
    path.write_text(
        'schema_version = 2\n[releases."2026.05"]\nauto_retire = true\nretire = "soon"\n'
        f'[[releases."2026.05".adapters]]\n{pinned}'
        f'[[releases."2026.05".adapters]]\n{pinned}'
        'source = "pypi"\n'
        '[releases."2026.5"]\nadapters = []\n'
    )
    with pytest.raises(LockError) as info:
        read_lock(path)
    assert [str(p) for p in info.value.problems] == [
        f'{path}: releases."2026.05".retire: unknown key (expected auto_retire, adapters)',
        f'{path}: releases."2026.05".adapters[1].source: unknown key (expected name, version, '
        "manifest_sha256, implementation_sha256, distribution, distribution_version)",
        f'{path}: releases."2026.5": names the same release as releases."2026.05"; keep one table',
    ]
    path.write_text(
        'schema_version = 2\n[releases."2026.05"]\n'
        f'[[releases."2026.05".adapters]]\n{pinned}'
        f'[[releases."2026.05".adapters]]\n{pinned}'
    )
    with pytest.raises(LockError) as info:
        read_lock(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}: releases.\"2026.05\".adapters[1].name: 'alpha' is pinned twice in this release "
        "(also at adapters[0]); a release pins one version of each adapter",
    ]


def test_a_schema_1_lock_asks_for_a_re_pin(tmp_path: Path) -> None:
    path = tmp_path / "old.lock"
    path.write_text('schema_version = 1\n[releases."2026.05"]\nadapters = []\n')
    with pytest.raises(LockError) as info:
        read_lock(path)
    assert "written by an older spyre-adapters" in str(info.value)
    assert "spyre-adapters pin --stack R" in str(info.value)


def test_a_table_for_an_unknown_release_names_the_lock_file(
    registry: Registry, tmp_path: Path
) -> None:
    path = tmp_path / "x.lock"
    write_lock(pin(registry, "2026.05"), path)
    path.write_text(path.read_text().replace('"2026.05"', '"2026.04"'))
    with pytest.raises(LockError) as info:
        check_lock(read_lock(path), registry)
    (problem,) = info.value.problems
    assert (problem.where, problem.key) == (str(path), 'releases."2026.04"')
    assert problem.message.startswith("'2026.04' is not a release of the stack catalogue (known:")


def test_upgrade_moves_one_pin_and_keeps_the_others(
    registry: Registry, catalogue: FakeCatalogue
) -> None:
    from spyre_adapters.lock import PinMove, upgrade

    lock = pin(registry, "2026.05", auto_retire=False)
    newer = Registry(catalogue)
    newer.add_all(registry.manifests())
    newer.add(dataclasses.replace(registry.get("alpha"), version=Version("2.1")))
    newer.add(dataclasses.replace(registry.get("beta"), version=Version("1.1")))
    moved, moves = upgrade(lock, newer, "alpha")
    assert moves == [PinMove("2026.05", "alpha", Version("2.0"), Version("2.1"))]
    versions = {p.name: str(p.version) for p in moved.entry("2026.05").adapters}
    assert versions == {"alpha": "2.1", "beta": "1.0", "delta": "1.0", "gamma": "1.0"}
    assert [f.kind for f in check_lock(moved, newer)] == ["superseded"]  # beta is still behind
    with pytest.raises(UnknownAdapterError):
        upgrade(lock, newer, "omega")


def test_write_lock_to_a_missing_folder_is_a_lock_error(registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(LockError) as info:
        write_lock(pin(registry, "2026.05"), tmp_path / "missing" / "x.lock")
    assert "the folder" in str(info.value)
    assert "does not exist" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_the_hash_of_a_python_file_is_over_its_code_not_its_prose() -> None:
    source = b'''"""Module doc."""
import torch  # a comment


def f(x):
    """Doc of f."""
    return x + 1  # why
'''
    reworded = source.replace(b"Doc of f.", b"Reworded,\n    on two lines.").replace(
        b"# why", b"# because"
    )
    changed = source.replace(b"x + 1", b"x + 2")
    assert code_of(reworded) == code_of(source)
    assert code_of(changed) != code_of(source)
    assert b"Doc" not in code_of(source)
    assert b"import torch" in code_of(source)


def _tokenize_comments(source: str) -> list[tuple[int, int, int, int]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(*t.start, *t.end) for t in tokens if t.type == tokenize.COMMENT]


TRICKY_SOURCES = [
    's = "# not a comment"  # a comment\n',
    "s = '#' + \"'\"  # it's a comment with a quote\n",
    'd = """a "quoted" # word\n and "" two lines"""  # after\n',
    "e = r'\\\\' + r'\\''  # raw strings: two backslashes, an escaped quote\n",
    'f = "escaped \\" quote # still string"  # comment\n',
    'g = "line \\\n  continued # inside"  # out\n',
    'h = f"{x!r:#>10}"  # format spec hash\n',
    "i = b'#'\r\n# CRLF line\r\nj = 1\r\n",
    "k = 'é'  # columns in characters: é\n# last line, no newline",
    "l = ('a'  # inside an implicit concatenation\n     'b')\n",
    'def f():\n    """Doc # not comment."""\n    return \'\\\'#\'  # c\n',
]


@pytest.mark.parametrize("source", TRICKY_SOURCES)
def test_comment_spans_are_the_comments_tokenize_finds(source: str) -> None:
    compile(source, "<tricky>", "exec")  # each case is valid Python
    assert comment_spans(source) == _tokenize_comments(source)


def test_comment_spans_agree_with_tokenize_on_real_sources() -> None:
    """Over the project's own sources and a part of the standard library: the built-ins'
    hashes (``manifests/released.sha256``) rest on these spans."""
    roots = [Path(__file__).parents[2] / name for name in ("spyre_adapters", "spyre_sim")]
    roots.append(Path(tokenize.__file__).parent / "json")
    files = [f for root in roots for f in sorted(root.rglob("*.py"))]
    files += [Path(tokenize.__file__), Path(dataclasses.__file__)]
    assert len(files) > 100
    for path in files:
        source = path.read_text(encoding="utf-8")
        assert comment_spans(source) == _tokenize_comments(source), path
