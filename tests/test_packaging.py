"""The distribution ships every package and data file the code needs."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _declared_packages() -> tuple[set[str], dict[str, str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    tool = data["tool"]["setuptools"]
    return set(tool["packages"]), dict(tool.get("package-dir", {}))


def test_every_package_on_disk_is_declared() -> None:
    declared, package_dir = _declared_packages()
    on_disk: set[str] = set()
    for top in ("spyre_sim", "spyre_adapters", "pytest_spyre"):
        for init in (ROOT / top).rglob("__init__.py"):
            on_disk.add(".".join(init.parent.relative_to(ROOT).parts))
    for name, directory in package_dir.items():
        assert (ROOT / directory / "__init__.py").is_file(), f"{name} maps to {directory}"
        on_disk.add(name)
    assert on_disk == declared, (
        f"pyproject [tool.setuptools] packages is out of date: "
        f"missing {sorted(on_disk - declared)}, stale {sorted(declared - on_disk)}"
    )


def test_builtin_manifests_resolve_as_package_data() -> None:
    from importlib.resources import files

    tomls = list((ROOT / "manifests").rglob("*.toml"))
    assert tomls, "no built-in manifests found"
    root = files("spyre_adapters.manifests")
    for path in tomls:
        rel = path.relative_to(ROOT / "manifests")
        assert root.joinpath(*rel.parts).is_file(), f"{rel} is not reachable as package data"
