"""Versioned adapters that bridge a Spyre stack release's gaps, and their lifecycle.

Importing this package imports neither torch nor any plugin; plugins are discovered when a
registry is built (:func:`build_registry`, or on the first :func:`prepare` without one).
"""

from __future__ import annotations

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
