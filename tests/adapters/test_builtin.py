"""The built-in plugin registers every shipped manifest through the same hook as third parties."""

from __future__ import annotations

from importlib.resources import files

import pytest

from spyre_adapters import build_registry


def test_builtin_plugin_registers_every_shipped_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPYRE_ADAPTERS_DISABLE", raising=False)
    shipped = sorted(
        f"{folder.name}/{file.name}"
        for folder in files("spyre_adapters.manifests").iterdir()
        if folder.is_dir()
        for file in folder.iterdir()
        if file.name.endswith(".toml")
    )
    registry = build_registry()
    assert "builtin" in registry.plugins
    builtin = [
        m for m in registry.manifests() if registry.source_of(m).startswith("plugin 'builtin'")
    ]
    assert sorted(f"{m.name}/{m.version}.toml" for m in builtin) == shipped


def test_builtin_plugin_can_be_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "builtin")
    registry = build_registry()
    assert "builtin" not in registry.plugins
    assert not any(registry.source_of(m).startswith("plugin 'builtin'") for m in registry)
