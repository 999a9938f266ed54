"""The registry: pluggy discovery, disable list, duplicates, atomic batches, third parties."""

from __future__ import annotations

import dataclasses
import textwrap
import types
from pathlib import Path

import pytest
from packaging.version import Version

from spyre_adapters import (
    DuplicateAdapterError,
    ManifestError,
    PluginError,
    Registry,
    UnknownAdapterError,
    build_registry,
    hookimpl,
)
from spyre_adapters.errors import PluginHookError

from .conftest import DATA, FakeCatalogue


def plugin_loading(path: Path, name: str) -> types.ModuleType:
    """A plugin module (built in the test) registering the manifests under ``path``."""
    module = types.ModuleType(name)

    @hookimpl
    def spyre_adapters_register(registry: Registry) -> None:
        registry.load_directory(path)

    module.spyre_adapters_register = spyre_adapters_register  # type: ignore[attr-defined]
    return module


def test_versions_coexist_and_lookups(registry: Registry) -> None:
    assert registry.names() == ["alpha", "beta", "delta", "gamma"]
    assert [m.version for m in registry.versions("alpha")] == [Version("1.0"), Version("2.0")]
    assert registry.get("alpha").version == Version("2.0")
    assert registry.get("alpha", "1.0").version == Version("1.0")
    assert "alpha" in registry
    assert "omega" not in registry
    assert len(registry) == 5
    assert [m.name for m in registry.bridging("sin-cos")] == ["alpha", "alpha"]
    assert registry.source_of(registry.get("beta")) == "test data"


def test_where_copies_the_kept_manifests_and_leaves_the_registry_as_it_is(
    registry: Registry,
) -> None:
    kept = registry.where(lambda m: not (m.name == "alpha" and m.version == Version("2.0")))
    assert kept is not registry
    assert kept.catalogue is registry.catalogue
    assert kept.import_entry_points == registry.import_entry_points
    assert [m.version for m in kept.versions("alpha")] == [Version("1.0")]
    assert kept.get("alpha").version == Version("1.0")  # the newest kept
    assert len(kept) == 4
    assert len(registry) == 5  # unchanged
    assert (
        registry.where(lambda m: m.name == "beta", source="a test").source_of(registry.get("beta"))
        == "a test"
    )


def test_unknown_adapter_lists_what_is_known(registry: Registry) -> None:
    with pytest.raises(UnknownAdapterError) as info:
        registry.get("omega")
    assert (
        str(info.value)
        == "adapter 'omega' is not registered (registered: alpha, beta, delta, gamma)"
    )
    with pytest.raises(UnknownAdapterError) as info:
        registry.get("alpha", "3.0")
    assert str(info.value) == (
        "adapter 'alpha' version 3.0 is not registered (registered: alpha 1.0, alpha 2.0)"
    )


def test_duplicate_names_both_sources_and_leaves_registry_unchanged(registry: Registry) -> None:
    beta = registry.get("beta")
    new = dataclasses.replace(beta, name="epsilon")
    before = registry.manifests()
    with pytest.raises(DuplicateAdapterError) as info:
        registry.add_all([new, beta], source="plugin 'other'")
    assert info.value.first == "test data"
    assert info.value.second == "plugin 'other'"
    assert str(info.value) == (
        "adapter 'beta' version 1.0 is registered twice: by test data and by plugin 'other'; "
        "each name+version must come from one source (uninstall one of them, or disable a "
        "plugin with SPYRE_ADAPTERS_DISABLE=<plugin name>)"
    )
    assert registry.manifests() == before  # epsilon was not added either


def test_build_registry_from_plugins_names_plugin_sources(catalogue: FakeCatalogue) -> None:
    first = plugin_loading(DATA / "valid", "first_plugin")
    second = plugin_loading(DATA / "valid", "second_plugin")
    reg = build_registry(catalogue, entry_points=False, plugins=[first])
    assert reg.plugins == ["first_plugin"]
    alpha = reg.get("alpha", "1.0")
    assert reg.source_of(alpha) == f"plugin 'first_plugin' file {alpha.source}"
    with pytest.raises(DuplicateAdapterError) as info:
        build_registry(catalogue, entry_points=False, plugins=[first, second])
    assert {info.value.first, info.value.second} == {
        f"plugin 'first_plugin' file {alpha.source}",
        f"plugin 'second_plugin' file {alpha.source}",
    }


def test_disable_list_from_argument_and_environment(
    catalogue: FakeCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plugin_loading(DATA / "valid", "first_plugin")
    second = plugin_loading(DATA / "valid", "second_plugin")
    reg = build_registry(
        catalogue, entry_points=False, plugins=[first, second], disable=["second_plugin"]
    )
    assert reg.plugins == ["first_plugin"]
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", " first_plugin , ")
    reg = build_registry(catalogue, entry_points=False, plugins=[first, second])
    assert reg.plugins == ["second_plugin"]


def test_a_bad_manifest_set_fails_the_whole_build(catalogue: FakeCatalogue) -> None:
    good = plugin_loading(DATA / "valid", "good_plugin")
    bad = plugin_loading(DATA / "broken", "bad_plugin")
    with pytest.raises(ManifestError) as info:
        build_registry(catalogue, entry_points=False, plugins=[good, bad])
    assert all("broken" in p.where for p in info.value.problems)


def test_a_plugin_that_raises_is_named(catalogue: FakeCatalogue) -> None:
    module = types.ModuleType("crashing_plugin")

    @hookimpl
    def spyre_adapters_register(registry: Registry) -> None:
        raise OSError("manifest folder is not readable")

    module.spyre_adapters_register = spyre_adapters_register  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as info:
        build_registry(catalogue, entry_points=False, plugins=[module])
    assert info.value.plugin == "crashing_plugin"
    assert str(info.value) == (
        "adapter plugin 'crashing_plugin' failed to register: OSError: manifest folder is not "
        "readable (fix the plugin, or disable it with SPYRE_ADAPTERS_DISABLE=crashing_plugin)"
    )


def test_misspelt_hook_fails_loudly(catalogue: FakeCatalogue) -> None:
    module = types.ModuleType("typo_plugin")

    @hookimpl
    def spyre_adapter_register(registry: Registry) -> None:  # missing "s"
        raise AssertionError("never called")

    module.spyre_adapter_register = spyre_adapter_register  # type: ignore[attr-defined]
    with pytest.raises(PluginHookError) as info:
        build_registry(catalogue, entry_points=False, plugins=[module])
    assert (info.value.plugin, info.value.hook) == ("typo_plugin", "spyre_adapter_register")
    assert info.value.known == ["spyre_adapters_register"]
    assert str(info.value) == (
        "adapter plugin 'typo_plugin' failed to register: it implements "
        "'spyre_adapter_register', which is not a hook of spyre-adapters; did you mean "
        "'spyre_adapters_register'? (known hooks: spyre_adapters_register) (fix the plugin, or "
        "disable it with SPYRE_ADAPTERS_DISABLE=typo_plugin)"
    )


def test_hook_with_arguments_the_spec_does_not_offer_names_plugin_and_hook(
    catalogue: FakeCatalogue,
) -> None:
    module = types.ModuleType("argument_plugin")

    @hookimpl
    def spyre_adapters_register(reg: Registry) -> None:  # the argument is called "registry"
        raise AssertionError("never called")

    module.spyre_adapters_register = spyre_adapters_register  # type: ignore[attr-defined]
    with pytest.raises(PluginHookError) as info:
        build_registry(catalogue, entry_points=False, plugins=[module])
    assert (info.value.plugin, info.value.hook) == ("argument_plugin", "spyre_adapters_register")
    assert "'reg'" in str(info.value)
    assert "(known hooks: spyre_adapters_register)" in str(info.value)


def test_third_party_package_is_discovered_through_its_entry_point(
    catalogue: FakeCatalogue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed distribution (dist-info with entry_points.txt on sys.path) is found."""
    site = tmp_path / "site"
    package = site / "acme_spyre_adapters"
    (package / "manifests" / "acme-norm").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "impl.py").write_text(
        textwrap.dedent(
            """
            class AcmeNorm:
                def matches(self, model):
                    return False

                def apply(self, model, edit):
                    pass

            adapter = AcmeNorm()
            """
        )
    )
    (package / "plugin.py").write_text(
        textwrap.dedent(
            """
            from importlib.resources import files

            from spyre_adapters import hookimpl

            @hookimpl
            def spyre_adapters_register(registry):
                registry.load_directory(files("acme_spyre_adapters") / "manifests")
            """
        )
    )
    (package / "manifests" / "acme-norm" / "0.3.toml").write_text(
        textwrap.dedent(
            """
            schema_version = 1
            name = "acme-norm"
            version = "0.3"
            kind = "scaffolding"
            summary = "Acme's RMSNorm without pow."
            gaps = ["pow"]
            families = ["acme"]
            stacks = ">=2025.12"
            entry_point = "acme_spyre_adapters.impl:adapter"
            """
        )
    )
    dist = site / "acme_spyre_adapters-0.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-spyre-adapters\nVersion: 0.3\n"
    )
    (dist / "entry_points.txt").write_text("[spyre_adapters]\nacme = acme_spyre_adapters.plugin\n")
    monkeypatch.syspath_prepend(str(site))

    reg = build_registry(catalogue, disable=["builtin"])
    assert reg.plugins == ["acme"]
    manifest = reg.get("acme-norm")
    assert manifest.version == Version("0.3")
    assert reg.source_of(manifest).startswith("plugin 'acme' file ")

    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "acme")
    assert len(build_registry(catalogue, disable=["builtin"])) == 0


def test_an_entry_point_that_does_not_import_is_named(
    catalogue: FakeCatalogue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    dist = site / "broken_spyre_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "broken_spyre_plugin.py").write_text("raise RuntimeError('needs CUDA')\n")
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-spyre-plugin\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text("[spyre_adapters]\nbroken = broken_spyre_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(PluginError) as info:
        build_registry(catalogue, disable=["builtin"])
    assert str(info.value) == (
        "adapter plugin 'broken' failed to register: entry point 'broken_spyre_plugin' does not "
        "import: RuntimeError: needs CUDA (fix the plugin, or disable it with "
        "SPYRE_ADAPTERS_DISABLE=broken)"
    )
    assert build_registry(catalogue, disable=["builtin", "broken"]).plugins == []


def test_pytest_spyre_reports_a_misspelt_hook_as_a_usage_error(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``pytest --spyre`` the same error is a usage error naming plugin and hook, not an
    INTERNALERROR with pluggy's traceback."""
    site = tmp_path / "site"
    dist = site / "typo_spyre_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "typo_spyre_plugin.py").write_text(
        "from spyre_adapters import hookimpl\n\n"
        "@hookimpl\n"
        "def spyre_adapter_register(registry):\n"
        "    pass\n"
    )
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: typo-spyre-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[spyre_adapters]\ntypo = typo_spyre_plugin\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "builtin")
    result = pytester.runpytest_subprocess("--spyre")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*adapter plugin 'typo' failed to register: it implements 'spyre_adapter_register', "
            "which is not a hook of spyre-adapters; did you mean 'spyre_adapters_register'? "
            "(known hooks: spyre_adapters_register)*"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
