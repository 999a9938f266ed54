"""Preparing a model for a stack release: apply the resolved adapters, atomically, once.

``prepare(model, stack="2026.05")`` resolves the adapters for the release (or takes exactly the
set pinned in a lock), asks each whether it ``matches`` the model, and applies the matching ones
each after the adapters its manifest says it follows (``after``), else in ``order`` (then
name) (:mod:`spyre_adapters.ordering`), each through its own
:class:`~spyre_adapters.contract.ModelEdit`. A run of consecutive matching adapters of one
class that offers ``apply_together`` (the op bridges: some thirty at a release, each marking
every module) is applied with one call and one edit, and each of them is still recorded.

- **Atomic**: when any adapter fails (in ``matches`` or ``apply``), every change of this call is
  rolled back, the adapters applied before it included, and :class:`AdapterApplyError` names the
  adapter, the stage and the cause. The model is left exactly as it was.
- **Idempotent**: preparing an already prepared model for the same release with the same adapter
  set is a no-op that returns the recorded result. Preparing it for a *different* release (or a
  different set) raises :class:`AlreadyPreparedError`: call :func:`restore` first. Two adapter
  sets are never stacked silently. (A model prepared with no adapter applied carries nothing to
  undo and may be prepared again for any release.)
- **Under accelerate's hooks** (a model loaded with ``device_map``, offloaded): adapters see
  and edit the forwards the hooks wrap, and the hooks keep running around the adapted
  forwards (:mod:`spyre_adapters._hooked_forwards`); ``restore`` leaves the hooks as they were.
- **Recorded** on the model (attribute ``spyre_adapters_state``): :func:`applied` lists
  :class:`AppliedAdapter` records (name, version, modules touched); :func:`restore` undoes every
  edit, newest first.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from spyre_adapters._hooked_forwards import stock_forwards
from spyre_adapters.errors import AdapterApplyError, AlreadyPreparedError
from spyre_adapters.lifecycle import Lifecycle, Status
from spyre_adapters.lock import Lock, pinned_manifests, read_lock
from spyre_adapters.ordering import application_order
from spyre_adapters.registry import Registry, build_registry
from spyre_adapters.stacks import ReleaseLike

if TYPE_CHECKING:
    from torch import nn

    from spyre_adapters.contract import ModelEdit
    from spyre_adapters.manifest import Manifest

__all__ = [
    "STATE_ATTRIBUTE",
    "AppliedAdapter",
    "Prepared",
    "applied",
    "default_registry",
    "prepare",
    "prepared_release",
    "restore",
]

#: Name of the attribute a prepared model carries.
STATE_ATTRIBUTE = "spyre_adapters_state"


@dataclass(frozen=True)
class AppliedAdapter:
    """An adapter applied to a model: which version, and the module paths it changed."""

    name: str
    version: Version
    modules: tuple[str, ...]


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` did for ``release``.

    ``applied``: adapters applied, in order. ``skipped``: resolved adapters whose ``matches``
    said no. ``retired``/``out_of_range``: names not applied at this release by the lifecycle
    (empty when a lock chose the set). ``locked``: the set came from a lock.
    """

    release: str
    applied: tuple[AppliedAdapter, ...]
    skipped: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    out_of_range: tuple[str, ...] = ()
    locked: bool = False


@dataclass
class _State:
    prepared: Prepared
    resolved: tuple[tuple[str, Version], ...]
    edits: list[ModelEdit] = field(default_factory=list)


@functools.cache
def default_registry() -> Registry:
    """The registry of installed plugins, built once per process on first use (with the
    built-in catalogue and ``SPYRE_ADAPTERS_DISABLE`` as set at that moment)."""
    return build_registry()


@dataclass(frozen=True)
class _Resolution:
    registry: Registry
    release: ReleaseLike
    size: int  # len(registry) when resolved: a registry only grows (``add``)
    manifests: tuple[Manifest, ...]
    retired: tuple[str, ...]
    out_of_range: tuple[str, ...]


#: Unlocked resolutions by (registry, release, auto_retire) identity. ``prepare`` runs for every
#: model a test suite builds, and the statuses of every adapter at a release do not change
#: while the registry and the release object stay the same (with no waivers, the date does
#: not enter them). Bounded: a release file read again is a new object.
_resolutions: dict[tuple[int, int, bool], _Resolution] = {}
_RESOLUTIONS_KEPT = 32


def _resolved(
    lifecycle: Lifecycle, release: ReleaseLike
) -> tuple[list[Manifest], tuple[str, ...], tuple[str, ...]]:
    """The manifests to apply at ``release`` in application order, and the names retired and
    out of range there (``lifecycle`` has no waivers: its statuses do not depend on the date)."""
    registry = lifecycle.registry
    key = (id(registry), id(release), lifecycle.auto_retire)
    held = _resolutions.get(key)
    if (
        held is not None
        and held.registry is registry
        and held.release is release
        and held.size == len(registry)
    ):
        return list(held.manifests), held.retired, held.out_of_range
    rows = lifecycle.status_at(release)
    manifests = application_order([row.manifest for row in rows if row.applied], registry.names())
    if len(_resolutions) >= _RESOLUTIONS_KEPT:
        _resolutions.clear()
    _resolutions[key] = _Resolution(
        registry,
        release,
        len(registry),
        tuple(manifests),
        tuple(row.name for row in rows if row.status is Status.RETIRED),
        tuple(row.name for row in rows if row.status is Status.OUT_OF_RANGE),
    )
    return manifests, _resolutions[key].retired, _resolutions[key].out_of_range


def _state(model: nn.Module) -> _State | None:
    state = model.__dict__.get(STATE_ATTRIBUTE)
    return state if isinstance(state, _State) else None


def prepare(
    model: nn.Module,
    stack: str | os.PathLike[str] | ReleaseLike | None = None,
    *,
    lock: Lock | str | os.PathLike[str] | None = None,
    auto_retire: bool = True,
    registry: Registry | None = None,
) -> Prepared:
    """Apply the adapters resolved for ``stack`` to ``model`` (see the module docstring).

    ``stack``: a release name, a release TOML file, a release object, or ``None`` for the active
    release of :mod:`spyre_sim`. ``lock``: a :class:`~spyre_adapters.lock.Lock` or the path of a
    lock file; then exactly the set pinned for the release is applied (a missing entry, adapter
    or a hash mismatch raises :class:`~spyre_adapters.errors.LockError`), and ``auto_retire`` is
    not consulted. ``registry`` defaults to :func:`default_registry`.
    """
    from spyre_adapters.contract import ModelEdit

    registry = default_registry() if registry is None else registry
    lifecycle = Lifecycle(registry, auto_retire=auto_retire)
    release = lifecycle.release(stack)

    retired: tuple[str, ...] = ()
    out_of_range: tuple[str, ...] = ()
    if lock is not None:
        lock = lock if isinstance(lock, Lock) else read_lock(Path(lock))
        manifests = pinned_manifests(lock, registry, release.name)
        manifests = application_order(manifests, registry.names())
    else:
        manifests, retired, out_of_range = _resolved(lifecycle, release)
    resolved = tuple(m.key for m in manifests)

    previous = _state(model)
    if previous is not None:
        if previous.prepared.release == release.name and previous.resolved == resolved:
            return previous.prepared
        if previous.edits:
            what = ", ".join(f"{a.name} {a.version}" for a in previous.prepared.applied)
            detail = (
                f"applied {what}"
                if previous.prepared.release != release.name
                else f"applied {what}, a different adapter set"
            )
            raise AlreadyPreparedError(previous.prepared.release, release.name, detail)
        del model.__dict__[STATE_ATTRIBUTE]

    edits: list[ModelEdit] = []
    records: list[AppliedAdapter] = []
    skipped: list[str] = []

    def apply_one(manifest: Manifest, adapter: Any) -> None:
        edit = ModelEdit(model)
        try:
            adapter.apply(model, edit)
        except Exception as exc:
            edit.rollback()
            _undo(edits)
            raise AdapterApplyError(
                manifest.name, str(manifest.version), "apply", exc, [r.name for r in records]
            ) from exc
        edits.append(edit)
        records.append(AppliedAdapter(manifest.name, manifest.version, tuple(edit.touched)))

    def apply_run(run: list[tuple[Manifest, Any]]) -> None:
        """Apply consecutive matching adapters of one class that offers ``apply_together``
        (see :class:`~spyre_adapters.contract.Adapter`) with one call; on a failure, one by
        one, so that the error names the adapter that failed."""
        if len(run) > 1:
            edit = ModelEdit(model)
            try:
                type(run[0][1]).apply_together([adapter for _, adapter in run], model, edit)
            except Exception:
                edit.rollback()
            else:
                edits.append(edit)
                touched = tuple(edit.touched)
                records.extend(AppliedAdapter(m.name, m.version, touched) for m, _ in run)
                return
        for manifest, adapter in run:
            apply_one(manifest, adapter)

    # under accelerate's hooks, adapters see (and edit) the forwards the hooks wrap
    with stock_forwards(model):
        run: list[tuple[Manifest, Any]] = []  # matching adapters of one class, applied together
        for manifest in manifests:
            stage = "load"
            try:
                adapter = manifest.load()
                if run and type(adapter) is not type(run[0][1]):
                    apply_run(run)  # before another class's adapter looks at the model
                    run = []
                stage = "matches"
                matched = adapter.matches(model)
            except AdapterApplyError:
                raise
            except Exception as exc:
                _undo(edits)
                # the pending run counts as applied before this adapter, as one by one it would be
                before = [r.name for r in records] + [m.name for m, _ in run]
                raise AdapterApplyError(
                    manifest.name, str(manifest.version), stage, exc, before
                ) from exc
            if not matched:
                skipped.append(manifest.name)
                continue
            if callable(getattr(type(adapter), "apply_together", None)):
                run.append((manifest, adapter))
                continue
            apply_one(manifest, adapter)
        if run:
            apply_run(run)

    prepared = Prepared(
        release=release.name,
        applied=tuple(records),
        skipped=tuple(skipped),
        retired=retired,
        out_of_range=out_of_range,
        locked=lock is not None,
    )
    model.__dict__[STATE_ATTRIBUTE] = _State(prepared, resolved, edits)
    return prepared


def _undo(edits: Sequence[ModelEdit]) -> None:
    for edit in reversed(edits):
        edit.rollback()


def restore(model: nn.Module) -> list[AppliedAdapter]:
    """Undo every adapter ``prepare`` applied (newest first); return what was undone.
    A model that was never prepared is left alone (returns ``[]``)."""
    state = _state(model)
    if state is None:
        return []
    with stock_forwards(model):
        _undo(state.edits)
    del model.__dict__[STATE_ATTRIBUTE]
    return list(state.prepared.applied)


def applied(model: nn.Module) -> list[AppliedAdapter]:
    """The adapters applied to ``model`` by ``prepare``, in application order."""
    state = _state(model)
    return [] if state is None else list(state.prepared.applied)


def prepared_release(model: nn.Module) -> str | None:
    """The release ``model`` was prepared for, or ``None``."""
    state = _state(model)
    return None if state is None else state.prepared.release
