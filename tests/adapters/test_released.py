"""Released built-in versions are immutable: manifests/released.sha256 records each one's
manifest and implementation hash, and every released version stays installed. A version with
a development segment (PEP 440 ``2.0.0.dev1``) is not released yet: it is not recorded and may
still change; releasing it means renaming it to its final version and recording it."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from spyre_adapters import Registry, build_registry, builtin
from spyre_adapters.implementation import implementation_files, implementation_sha256
from spyre_adapters.lock import manifest_sha256
from spyre_adapters.manifest import Manifest

RECORD = Path(__file__).resolve().parents[2] / "manifests" / "released.sha256"
HOW = "manifests/README.md, 'Releasing a new version of an adapter'"


def read_record(text: str) -> dict[tuple[str, Version], tuple[str, str]]:
    """``(name, version) -> (manifest sha256, implementation sha256)``; one line each."""
    record: dict[tuple[str, Version], tuple[str, str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, version, manifest, implementation = line.split()
        key = (name, Version(version))
        assert key not in record, f"line {number}: {name} {version} is recorded twice"
        record[key] = (manifest, implementation)
    return record


def record_line(manifest: Manifest) -> str:
    return f"{manifest.name} {manifest.version} {manifest_sha256(manifest)} {implementation_sha256(manifest)}"


def mismatches(registry: Registry, record: dict[tuple[str, Version], tuple[str, str]]) -> list[str]:
    """Every way the installed built-ins differ from the record, as sentences."""
    found = []
    installed = {m.key: m for m in registry.manifests()}
    for key, (manifest_hash, implementation_hash) in sorted(record.items()):
        manifest = installed.get(key)
        if manifest is None:
            found.append(
                f"{key[0]} {key[1]} was released and is no longer installed: released versions "
                f"stay installed for the locks that pin them ({HOW})"
            )
            continue
        if manifest_sha256(manifest) != manifest_hash:
            found.append(
                f"the manifest of released {manifest.label} changed ({manifest.source}): put the "
                f"change in a new version ({HOW})"
            )
        if implementation_sha256(manifest) != implementation_hash:
            files = ", ".join(label for label, _ in implementation_files(manifest))
            found.append(
                f"the implementation of released {manifest.label} changed (it is {files}): put "
                f"the change in a new version with its own module ({HOW})"
            )
    for key, manifest in sorted(installed.items()):
        if key not in record and not manifest.version.is_devrelease:
            found.append(
                f"{manifest.label} is not recorded as released: add the line "
                f"'{record_line(manifest)}' to {RECORD.name}"
            )
    return found


@pytest.fixture(scope="module")
def builtins() -> Registry:
    return build_registry(entry_points=False, plugins=[builtin])


def test_every_released_version_is_installed_and_unchanged(builtins: Registry) -> None:
    problems = mismatches(builtins, read_record(RECORD.read_text(encoding="utf-8")))
    assert not problems, "\n".join(problems)


def test_the_record_holds_the_version_pairs_that_ship_side_by_side(builtins: Registry) -> None:
    record = read_record(RECORD.read_text(encoding="utf-8"))
    versions = {name: sorted(str(v) for n, v in record if n == name) for name, _ in record}
    assert versions["host-mask"] == ["1.0.0", "1.0.1", "1.1.0", "1.2.0"]
    assert versions["layernorm-two-pass"] == [
        "1.0.0",
        "1.0.1",
        "1.0.2",
        "1.1.0",
        "2.0.0",
        "2.0.1",
        "2.1.0",
    ]
    # 2.x starts where the stack changed what LayerNorm needs (fp32 inside norms, 2026.07)
    for version in ("2.0.0", "2.0.1"):
        assert str(builtins.get("layernorm-two-pass", version).stacks) == ">=2026.07"
    for version in ("1.0.1", "1.0.2"):
        assert str(builtins.get("layernorm-two-pass", version).stacks) == ">=2025.12"


def test_a_changed_implementation_or_manifest_is_caught(builtins: Registry) -> None:
    record = read_record(RECORD.read_text(encoding="utf-8"))
    key = ("rope-rotation", Version("1.0.0"))
    manifest_hash, implementation_hash = record[key]
    edited = {**record, key: (manifest_hash, "0" * 64)}
    assert mismatches(builtins, edited) == [
        "the implementation of released rope-rotation 1.0.0 changed (it is "
        "spyre_adapters.library._global_rebinding, spyre_adapters.library.rope): put the change "
        f"in a new version with its own module ({HOW})"
    ]
    edited = {**record, key: ("0" * 64, implementation_hash)}
    assert mismatches(builtins, edited)[0].startswith(
        "the manifest of released rope-rotation 1.0.0 changed"
    )
    gone = {**record, ("rope-rotation", Version("0.9")): record[key]}
    assert mismatches(builtins, gone)[0].startswith(
        "rope-rotation 0.9 was released and is no longer installed"
    )
    unrecorded = {k: v for k, v in record.items() if k != key}
    assert mismatches(builtins, unrecorded) == [
        f"rope-rotation 1.0.0 is not recorded as released: add the line "
        f"'{record_line(builtins.get(*key))}' to released.sha256"
    ]


def test_each_version_names_its_own_module_unless_the_code_is_the_same(builtins: Registry) -> None:
    """A new behaviour is a new module: two versions of one adapter naming the same entry point
    would make the older one change with the newer."""
    for name in builtins.names():
        modules = [m.entry_point for m in builtins.versions(name)]
        assert len(set(modules)) == len(modules), (name, modules)
