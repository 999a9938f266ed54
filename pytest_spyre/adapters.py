"""The plugin's view of the adapter registry for one stack release (and optional lock).

Answers the questions the plugin asks, in its own terms ("name version" strings): how many
adapter versions are registered, which apply at the release (or are pinned by the lock), which
are retirable at it (for the summary line that points to ``spyre-adapters audit``), which bridge
a given gap (for a blocked test's report); and applies them to a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import spyre_adapters
from spyre_adapters.lock import pinned_manifests
from spyre_sim.catalogue import Release

__all__ = ["AdapterView"]


def _entry(name: str, version: object) -> str:
    return f"{name} {version}"


@dataclass
class AdapterView:
    release: Release
    lock: spyre_adapters.Lock | None
    registry: spyre_adapters.Registry
    registered: int = 0
    resolved: list[str] = field(default_factory=list)
    retirable: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, release: Release, lock_path: Path | None) -> AdapterView:
        try:
            registry = spyre_adapters.default_registry()
            lock = None if lock_path is None else spyre_adapters.read_lock(lock_path)
            rows = spyre_adapters.status_at(registry, release)
            if lock is not None:
                manifests = pinned_manifests(lock, registry, release.name)
                resolved = [_entry(m.name, m.version) for m in manifests]
            else:
                resolved = [_entry(r.name, r.version) for r in rows if r.applied]
        except spyre_adapters.SpyreAdaptersError as exc:
            where = f"lock {str(lock_path)!r}" if lock_path else "the adapter registry"
            raise pytest.UsageError(
                f"--spyre: {where} cannot be used at stack {release.name}: {exc}"
            ) from exc
        # "retired" is "retirable" plus auto-retirement (not applied): both can be deleted
        deletable = (spyre_adapters.Status.RETIRABLE, spyre_adapters.Status.RETIRED)
        retirable = [
            {"name": r.name, "version": str(r.version), "status": r.status.value,
             "gaps": sorted(r.manifest.gaps)}
            for r in rows
            if r.status in deletable
        ]  # fmt: skip
        return cls(release, lock, registry, len(registry.manifests()), sorted(resolved),
                   sorted(retirable, key=lambda a: (a["name"], a["version"])))  # fmt: skip

    def bridging(self, gap: str) -> list[str]:
        """Registered adapters whose manifest lists ``gap`` (newest version of each name)."""
        best: dict[str, spyre_adapters.Manifest] = {}
        for manifest in self.registry.bridging(gap):
            held = best.get(manifest.name)
            if held is None or manifest.version > held.version:
                best[manifest.name] = manifest
        return sorted(_entry(m.name, m.version) for m in best.values())

    def prepare(self, model: nn.Module) -> list[str]:
        prepared = spyre_adapters.prepare(
            model, self.release, lock=self.lock, registry=self.registry
        )
        return [_entry(a.name, a.version) for a in prepared.applied]
