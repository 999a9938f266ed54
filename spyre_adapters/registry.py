"""The adapter registry, and the factory that fills it through the pluggy hook.

:func:`build_registry` is the only place plugins are discovered: it builds a
``pluggy.PluginManager``, loads the entry-point group ``spyre_adapters`` (the built-in adapters
are the entry point ``builtin``), honours the disable list (argument ``disable`` plus the
environment variable ``SPYRE_ADAPTERS_DISABLE=name1,name2``, read only here, when called),
checks that every hook implementation matches a spec (as pluggy's ``check_pending`` does, but
naming the plugin, the hook and the known hooks in a :class:`PluginHookError`), and calls
``spyre_adapters_register(registry)`` on each plugin in turn. The build is all or nothing: a
plugin that fails, an invalid manifest, or a duplicate name+version raises, and no registry is
returned.

Registration carries the version of what registered it: every manifest is recorded with the
plugin that added it and, for a plugin loaded from an entry point, the distribution and
distribution version that ship that entry point (:meth:`Registry.provider_of`).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pluggy
from packaging.version import Version

from spyre_adapters import hookspecs
from spyre_adapters.errors import (
    DuplicateAdapterError,
    PluginError,
    PluginHookError,
    SpyreAdaptersError,
    UnknownAdapterError,
)
from spyre_adapters.manifest import Manifest, load_manifests
from spyre_adapters.stacks import CatalogueLike, default_catalogue

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable

__all__ = ["DISABLE_ENV", "Provider", "Registry", "build_registry"]

#: Environment variable naming plugins (entry-point names) to skip, comma separated.
DISABLE_ENV = "SPYRE_ADAPTERS_DISABLE"


@dataclass(frozen=True)
class Provider:
    """Who registered a manifest: the plugin name (``None`` for code calling ``add``) and, for
    a plugin loaded from an entry point, the distribution and its version."""

    plugin: str | None = None
    distribution: str | None = None
    version: str | None = None


class Registry:
    """Every installed adapter manifest, keyed by name and version.

    Several versions of one adapter may coexist; the same name and version twice is an error
    naming both sources. Adding is atomic: a rejected batch leaves the registry unchanged.
    """

    def __init__(self, catalogue: CatalogueLike, *, import_entry_points: bool = True) -> None:
        self.catalogue = catalogue
        #: whether manifest entry points are imported when validated (``False``: only located,
        #: for processes that run no adapter; see :func:`~spyre_adapters.manifest.load_manifests`)
        self.import_entry_points = import_entry_points
        self._manifests: dict[tuple[str, Version], Manifest] = {}
        self._sources: dict[tuple[str, Version], str] = {}
        # name -> versions oldest first; the sorted views are rebuilt on add, not on read
        self._by_name: dict[str, tuple[Manifest, ...]] = {}
        self._sorted: tuple[Manifest, ...] = ()
        self._providers: dict[tuple[str, Version], Provider] = {}
        self._plugin: str | None = None
        self._provider = Provider()
        self.plugins: list[str] = []

    # -- adding ------------------------------------------------------------------------------
    def _describe_source(self, manifest: Manifest, source: str | None) -> str:
        if source is not None:
            return source
        parts = []
        if self._plugin is not None:
            parts.append(f"plugin {self._plugin!r}")
        if manifest.source:
            parts.append(f"file {manifest.source}")
        return " ".join(parts) if parts else "code"

    def add(self, manifest: Manifest, *, source: str | None = None) -> None:
        """Register one manifest. ``source`` describes where it came from (default: the
        plugin being loaded and the manifest file)."""
        self.add_all([manifest], source=source)

    def add_all(self, manifests: Iterable[Manifest], *, source: str | None = None) -> None:
        """Register several manifests, all or none."""
        batch: dict[tuple[str, Version], str] = {}
        pending = list(manifests)
        for manifest in pending:
            where = self._describe_source(manifest, source)
            first = self._sources.get(manifest.key) or batch.get(manifest.key)
            if first is not None:
                raise DuplicateAdapterError(manifest.name, str(manifest.version), first, where)
            batch[manifest.key] = where
        for manifest in pending:
            self._manifests[manifest.key] = manifest
            self._sources[manifest.key] = batch[manifest.key]
            self._providers[manifest.key] = self._provider
        grouped: dict[str, list[Manifest]] = {}
        for manifest in pending:
            grouped.setdefault(manifest.name, []).append(manifest)
        for name, added in grouped.items():
            merged = [*self._by_name.get(name, ()), *added]
            self._by_name[name] = tuple(sorted(merged, key=lambda m: m.version))
        if pending:
            self._sorted = tuple(m for name in sorted(self._by_name) for m in self._by_name[name])

    def load_directory(
        self, root: Traversable | Path | str, *, source: str | None = None
    ) -> list[Manifest]:
        """Validate every manifest under ``root`` (``<name>/<version>.toml``) against this
        registry's catalogue and register them all, or raise and register none."""
        manifests = load_manifests(
            Path(root) if isinstance(root, str) else root,
            self.catalogue,
            import_entry_point=self.import_entry_points,
        )
        self.add_all(manifests, source=source)
        return manifests

    # -- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._manifests)

    def __iter__(self) -> Iterator[Manifest]:
        return iter(self.manifests())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def manifests(self) -> tuple[Manifest, ...]:
        """Every manifest, sorted by name then version."""
        return self._sorted

    def where(self, keep: Callable[[Manifest], bool], *, source: str | None = None) -> Registry:
        """A new registry over the same catalogue holding the manifests ``keep`` accepts, added
        with ``source`` as :meth:`add_all` adds them (a registry without some versions, or up
        to some version, for a comparison)."""
        kept = Registry(self.catalogue, import_entry_points=self.import_entry_points)
        kept.add_all((m for m in self.manifests() if keep(m)), source=source)
        return kept

    def names(self) -> list[str]:
        """Adapter names, sorted."""
        return sorted(self._by_name)

    def versions(self, name: str) -> tuple[Manifest, ...]:
        """Every version of adapter ``name``, oldest first (empty when unknown)."""
        return self._by_name.get(name, ())

    def get(self, name: str, version: Version | str | None = None) -> Manifest:
        """The manifest of ``name`` at ``version`` (default: the highest version)."""
        versions = self.versions(name)
        if not versions:
            raise UnknownAdapterError(name, None, self.names())
        if version is None:
            return versions[-1]
        wanted = Version(str(version))
        for manifest in versions:
            if manifest.version == wanted:
                return manifest
        known = [f"{m.name} {m.version}" for m in versions]
        raise UnknownAdapterError(name, str(version), known)

    def source_of(self, manifest: Manifest) -> str:
        """Where ``manifest`` was registered from."""
        return self._sources[manifest.key]

    def provider_of(self, manifest: Manifest) -> Provider:
        """The plugin (and distribution) that registered ``manifest``."""
        return self._providers.get(manifest.key, Provider())

    def bridging(self, gap_id: str) -> tuple[Manifest, ...]:
        """Every manifest that lists ``gap_id``."""
        return tuple(m for m in self.manifests() if gap_id in m.gaps)

    @contextmanager
    def _loading(self, plugin: str, provider: Provider | None = None) -> Iterator[None]:
        self._plugin = plugin
        self._provider = provider or Provider(plugin)
        try:
            yield
        finally:
            self._plugin = None
            self._provider = Provider()


def _disabled_from_env() -> list[str]:
    value = os.environ.get(DISABLE_ENV, "")
    return [name.strip() for name in value.split(",") if name.strip()]


def build_registry(
    catalogue: CatalogueLike | None = None,
    *,
    disable: Sequence[str] = (),
    entry_points: bool = True,
    plugins: Sequence[object] = (),
    import_entry_points: bool = True,
) -> Registry:
    """Discover adapter plugins and return a filled :class:`Registry`.

    ``catalogue`` validates gap ids and releases (default: the built-in stack catalogue).
    ``disable`` lists plugin names to skip, added to ``SPYRE_ADAPTERS_DISABLE``.
    ``entry_points=False`` skips the installed entry points (built-ins included) and uses only
    ``plugins``: extra plugin objects or modules implementing the hook (registered under their
    ``__name__``, or their class name). ``import_entry_points=False`` validates the manifests'
    entry points without importing them (for tools that run no adapter: no torch import).
    """
    catalogue = default_catalogue() if catalogue is None else catalogue
    blocked = [*disable, *_disabled_from_env()]
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    for name in blocked:
        manager.set_blocked(name)
    distributions: dict[str, Provider] = {}
    if entry_points:
        distributions = _load_entry_points(manager)
    for plugin in plugins:
        name = _plugin_name(plugin)
        if not manager.is_blocked(name):
            _register(manager, plugin, name)
    _check_hooks(manager)

    registry = Registry(catalogue, import_entry_points=import_entry_points)
    for impl in manager.hook.spyre_adapters_register.get_hookimpls():
        name = impl.plugin_name
        with registry._loading(name, distributions.get(name)):
            try:
                impl.function(registry=registry)
            except SpyreAdaptersError:
                raise
            except Exception as exc:
                raise PluginError(name, f"{type(exc).__name__}: {exc}") from exc
        registry.plugins.append(name)
    registry.plugins.sort()
    return registry


def _known_hooks(manager: pluggy.PluginManager) -> list[str]:
    return sorted(
        name
        for name in vars(manager.hook)
        if not name.startswith("_") and getattr(manager.hook, name).has_spec()
    )


def _register(manager: pluggy.PluginManager, plugin: object, name: str) -> None:
    """``manager.register``, with a hook implementation whose arguments the spec does not
    offer reported as a :class:`PluginHookError` naming the plugin and the hook."""
    try:
        manager.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        found = re.search(r"for hook '([^']+)'", str(exc))
        hook = found.group(1) if found else "?"
        detail = " ".join(str(exc).split())
        raise PluginHookError(name, hook, _known_hooks(manager), detail) from exc


def _check_hooks(manager: pluggy.PluginManager) -> None:
    """pluggy's ``check_pending``, naming the plugin, the unknown hook and the known ones."""
    known = _known_hooks(manager)
    for hook_name in sorted(vars(manager.hook)):
        caller = getattr(manager.hook, hook_name)
        if hook_name.startswith("_") or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook:
                continue
            close = difflib.get_close_matches(hook_name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise PluginHookError(
                impl.plugin_name,
                hook_name,
                known,
                f"it implements {hook_name!r}, which is not a hook of spyre-adapters{hint}",
            )


def _load_entry_points(manager: pluggy.PluginManager) -> dict[str, Provider]:
    """Register every entry point of group ``spyre_adapters`` (as pluggy's own loader does:
    blocked names and names already registered are skipped), naming a plugin that fails to
    import; return the distribution of each plugin registered."""
    providers: dict[str, Provider] = {}
    for dist in importlib.metadata.distributions():
        for entry_point in dist.entry_points:
            if entry_point.group != hookspecs.PROJECT_NAME:
                continue
            name = entry_point.name
            if manager.is_blocked(name) or manager.get_plugin(name) is not None:
                continue
            try:
                plugin = entry_point.load()
            except Exception as exc:
                raise PluginError(
                    name,
                    f"entry point {entry_point.value!r} does not import: "
                    f"{type(exc).__name__}: {exc}",
                ) from exc
            _register(manager, plugin, name)
            providers[name] = Provider(name, dist.metadata["Name"], dist.version)
    return providers


def _plugin_name(plugin: object) -> str:
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    name = getattr(plugin, "__name__", None)
    return name if isinstance(name, str) else type(plugin).__name__
