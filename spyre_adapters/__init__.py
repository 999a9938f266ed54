"""Versioned adapters that bridge a Spyre stack release's gaps, and their lifecycle.

Importing this package imports neither torch nor any plugin; plugins are discovered when a
registry is built (:func:`build_registry`, or on the first :func:`prepare` without one). The
names below are imported from their modules on first use (PEP 562), so that a command that
needs one part (``spyre-adapters --version``, ``list``) does not pay for the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyre_adapters.audit import AuditDiff, AuditFinding, AuditReport, audit_diff, audit_release
    from spyre_adapters.errors import (
        AdapterApplyError,
        AdapterOrderError,
        AlreadyPreparedError,
        DuplicateAdapterError,
        LockError,
        ManifestError,
        PluginError,
        PluginHookError,
        Problem,
        SpyreAdaptersError,
        UnknownAdapterError,
        UnknownReleaseError,
        WaiverError,
    )
    from spyre_adapters.hookspecs import hookimpl
    from spyre_adapters.lifecycle import AdapterStatus, Lifecycle, Status, StatusChange, status_at
    from spyre_adapters.lock import (
        DEFAULT_LOCK_FILE,
        Lock,
        LockEntry,
        LockFinding,
        PinMove,
        PinnedAdapter,
        check_lock,
        pin,
        read_lock,
        upgrade,
        write_lock,
    )
    from spyre_adapters.manifest import AdapterKind, Manifest, load_manifest, load_manifests
    from spyre_adapters.preparation import (
        AppliedAdapter,
        Prepared,
        applied,
        default_registry,
        prepare,
        prepared_release,
        restore,
    )
    from spyre_adapters.registry import DISABLE_ENV, Provider, Registry, build_registry
    from spyre_adapters.waivers import Waiver, check_waivers, load_waivers

#: public name -> the module that defines it
_EXPORTS = {
    "AdapterApplyError": "spyre_adapters.errors",
    "AdapterKind": "spyre_adapters.manifest",
    "AdapterOrderError": "spyre_adapters.errors",
    "AdapterStatus": "spyre_adapters.lifecycle",
    "AlreadyPreparedError": "spyre_adapters.errors",
    "AppliedAdapter": "spyre_adapters.preparation",
    "AuditDiff": "spyre_adapters.audit",
    "AuditFinding": "spyre_adapters.audit",
    "AuditReport": "spyre_adapters.audit",
    "DEFAULT_LOCK_FILE": "spyre_adapters.lock",
    "DISABLE_ENV": "spyre_adapters.registry",
    "DuplicateAdapterError": "spyre_adapters.errors",
    "Lifecycle": "spyre_adapters.lifecycle",
    "Lock": "spyre_adapters.lock",
    "LockEntry": "spyre_adapters.lock",
    "LockError": "spyre_adapters.errors",
    "LockFinding": "spyre_adapters.lock",
    "Manifest": "spyre_adapters.manifest",
    "ManifestError": "spyre_adapters.errors",
    "PinMove": "spyre_adapters.lock",
    "PinnedAdapter": "spyre_adapters.lock",
    "PluginError": "spyre_adapters.errors",
    "PluginHookError": "spyre_adapters.errors",
    "Prepared": "spyre_adapters.preparation",
    "Problem": "spyre_adapters.errors",
    "Provider": "spyre_adapters.registry",
    "Registry": "spyre_adapters.registry",
    "SpyreAdaptersError": "spyre_adapters.errors",
    "Status": "spyre_adapters.lifecycle",
    "StatusChange": "spyre_adapters.lifecycle",
    "UnknownAdapterError": "spyre_adapters.errors",
    "UnknownReleaseError": "spyre_adapters.errors",
    "Waiver": "spyre_adapters.waivers",
    "WaiverError": "spyre_adapters.errors",
    "applied": "spyre_adapters.preparation",
    "audit_diff": "spyre_adapters.audit",
    "audit_release": "spyre_adapters.audit",
    "build_registry": "spyre_adapters.registry",
    "check_lock": "spyre_adapters.lock",
    "check_waivers": "spyre_adapters.waivers",
    "default_registry": "spyre_adapters.preparation",
    "hookimpl": "spyre_adapters.hookspecs",
    "load_manifest": "spyre_adapters.manifest",
    "load_manifests": "spyre_adapters.manifest",
    "load_waivers": "spyre_adapters.waivers",
    "pin": "spyre_adapters.lock",
    "prepare": "spyre_adapters.preparation",
    "prepared_release": "spyre_adapters.preparation",
    "read_lock": "spyre_adapters.lock",
    "restore": "spyre_adapters.preparation",
    "status_at": "spyre_adapters.lifecycle",
    "upgrade": "spyre_adapters.lock",
    "write_lock": "spyre_adapters.lock",
}

__all__ = [
    "DEFAULT_LOCK_FILE",
    "DISABLE_ENV",
    "AdapterApplyError",
    "AdapterOrderError",
    "AdapterKind",
    "AdapterStatus",
    "AuditDiff",
    "AuditFinding",
    "AuditReport",
    "AlreadyPreparedError",
    "AppliedAdapter",
    "DuplicateAdapterError",
    "Lifecycle",
    "Lock",
    "LockEntry",
    "LockError",
    "LockFinding",
    "Manifest",
    "ManifestError",
    "PinMove",
    "PinnedAdapter",
    "PluginError",
    "PluginHookError",
    "Prepared",
    "Problem",
    "Provider",
    "Registry",
    "SpyreAdaptersError",
    "Status",
    "StatusChange",
    "UnknownAdapterError",
    "UnknownReleaseError",
    "Waiver",
    "WaiverError",
    "applied",
    "audit_diff",
    "audit_release",
    "build_registry",
    "check_lock",
    "check_waivers",
    "default_registry",
    "hookimpl",
    "load_manifest",
    "load_manifests",
    "load_waivers",
    "pin",
    "prepare",
    "prepared_release",
    "read_lock",
    "restore",
    "status_at",
    "upgrade",
    "write_lock",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spyre_adapters' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
