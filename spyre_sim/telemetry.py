"""Always-on counters of what the emulated device did.

The hot path only bumps plain ``dict`` counters; :func:`snapshot` turns them into plain,
JSON-serialisable data (schema version 1)::

    {"schema_version": 1,
     "ops": {"aten.mm.default": {"native": 3}},
     "fallbacks": {"aten.arange.default": 2},
     "transfers": {"host_to_device": n, "device_to_host": n,
                   "host_to_device_bytes": b, "device_to_host_bytes": b},
     "gaps": {"sin-cos": {"count": 2, "modules": ["model.rotary_emb"],
                          "module_counts": {"model.rotary_emb": 2}}},
     "miscompiles": {"rotate-half": {"count": 1, "modules": [...], "module_counts": {...}}},
     "errors": {"sin-cos": 1}}

``gaps`` counts every op whose decision named a gap (fallback, decomposed, unsupported,
miscompiled, layout errors); ``errors`` counts the raised ones only. ``module_counts`` (an
addition to the base schema) keeps :func:`diff` exact; ``modules`` is its sorted key list.
Snapshots from several processes combine with :func:`merge`; :func:`record` captures what
happened inside a ``with`` block.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from spyre_sim.state import TRANSFER_KEYS, device_state

__all__ = ["Recording", "SCHEMA_VERSION", "diff", "merge", "record", "reset", "snapshot"]

SCHEMA_VERSION = 1

_TRANSFER_KEYS = TRANSFER_KEYS

# The counters live in the device state (spyre_sim.state); these names are the same dicts,
# so the hot path bumps a module-level dict.
_counters = device_state.counters
_ops = _counters.ops
_fallbacks = _counters.fallbacks
_transfers = _counters.transfers
_gaps = _counters.gaps
_miscompiles = _counters.miscompiles
_errors = _counters.errors

_NO_MODULE = ""  # key used when an op ran outside any nn.Module forward


def count_op(op: str, decision: str) -> None:
    """Count one op execution with its decision value (``"native"``, ``"cpu-fallback"``...)."""
    key = (op, decision)
    _ops[key] = _ops.get(key, 0) + 1


def count_fallback(op: str) -> None:
    """Count one op that ran on the host as a cpu-fallback."""
    _fallbacks[op] = _fallbacks.get(op, 0) + 1


def count_transfer(host_to_device: bool, nbytes: int) -> None:
    """Count one host<->device copy of ``nbytes`` bytes."""
    name = "host_to_device" if host_to_device else "device_to_host"
    _transfers[name] += 1
    _transfers[name + "_bytes"] += nbytes


def count_gap(gap: str, module_path: str | None) -> None:
    """Count one op that hit ``gap`` (inside the module at ``module_path``, if known)."""
    _bump(_gaps, gap, module_path)


def count_miscompile(gap: str, module_path: str | None) -> None:
    """Count one op whose result the device computed wrongly because of ``gap``."""
    _bump(_miscompiles, gap, module_path)


def count_error(gap: str) -> None:
    """Count one raised lowering/layout error for ``gap``."""
    _errors[gap] = _errors.get(gap, 0) + 1


def _bump(table: dict[str, dict[str, int]], gap: str, module_path: str | None) -> None:
    per_module = table.get(gap)
    if per_module is None:
        per_module = table[gap] = {}
    key = module_path or _NO_MODULE
    per_module[key] = per_module.get(key, 0) + 1


def reset() -> None:
    """Forget every count (e.g. between tests; ``device_state.reset()`` does it too)."""
    _counters.clear()


def _gap_entry(per_module: dict[str, int]) -> dict[str, Any]:
    named = {m: n for m, n in sorted(per_module.items()) if m != _NO_MODULE}
    return {"count": sum(per_module.values()), "modules": list(named), "module_counts": named}


def snapshot() -> dict[str, Any]:
    """The counts so far as plain data (dicts, lists, ints, strings): JSON-serialisable."""
    ops: dict[str, dict[str, int]] = {}
    for (op, decision), n in sorted(_ops.items()):
        ops.setdefault(op, {})[decision] = n
    return {
        "schema_version": SCHEMA_VERSION,
        "ops": ops,
        "fallbacks": dict(sorted(_fallbacks.items())),
        "transfers": dict(_transfers),
        "gaps": {g: _gap_entry(m) for g, m in sorted(_gaps.items())},
        "miscompiles": {g: _gap_entry(m) for g, m in sorted(_miscompiles.items())},
        "errors": dict(sorted(_errors.items())),
    }


def _empty() -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "ops": {},
        "fallbacks": {},
        "transfers": dict.fromkeys(_TRANSFER_KEYS, 0),
        "gaps": {},
        "miscompiles": {},
        "errors": {},
    }


def _module_counts(entry: dict[str, Any]) -> dict[str, int]:
    counts = entry.get("module_counts")
    if isinstance(counts, dict):
        return {str(k): int(v) for k, v in counts.items()}
    # A snapshot without per-module counts (written by hand or by an older tool): one each.
    return {str(m): 1 for m in entry.get("modules", [])}


def _combine(a: dict[str, Any], b: dict[str, Any], sign: int) -> dict[str, Any]:
    out = copy.deepcopy(a)
    for op, decisions in b.get("ops", {}).items():
        slot = out["ops"].setdefault(op, {})
        for decision, n in decisions.items():
            slot[decision] = slot.get(decision, 0) + sign * n
    for section in ("fallbacks", "errors", "transfers"):
        for key, n in b.get(section, {}).items():
            out[section][key] = out[section].get(key, 0) + sign * n
    for section in ("gaps", "miscompiles"):
        for gap, entry in b.get(section, {}).items():
            mine = out[section].get(gap, {"count": 0, "module_counts": {}})
            counts = _module_counts(mine)
            for m, n in _module_counts(entry).items():
                counts[m] = counts.get(m, 0) + sign * n
            counts = {m: n for m, n in sorted(counts.items()) if n > 0}
            out[section][gap] = {
                "count": mine.get("count", 0) + sign * entry.get("count", 0),
                "modules": list(counts),
                "module_counts": counts,
            }
    return out


def _prune(snap: dict[str, Any]) -> dict[str, Any]:
    snap["ops"] = {
        op: {d: n for d, n in ds.items() if n}
        for op, ds in sorted(snap["ops"].items())
        if any(ds.values())
    }
    for section in ("fallbacks", "errors"):
        snap[section] = {k: n for k, n in sorted(snap[section].items()) if n}
    for section in ("gaps", "miscompiles"):
        snap[section] = {g: e for g, e in sorted(snap[section].items()) if e["count"]}
    return snap


def merge(*snapshots: dict[str, Any]) -> dict[str, Any]:
    """Add several snapshots (e.g. one per pytest-xdist worker) into one."""
    total = _empty()
    for snap in snapshots:
        if snap.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(
                f"cannot merge telemetry schema_version {snap.get('schema_version')!r}; "
                f"this spyre_sim writes version {SCHEMA_VERSION}"
            )
        total = _combine(total, snap, +1)
    return _prune(total)


def diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What happened between two snapshots of the same process: ``after - before``."""
    return _prune(_combine(merge(after), before, -1))


class Recording:
    """Handle yielded by :func:`record`; ``.snapshot`` is filled in when the block exits."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = _empty()


@contextmanager
def record() -> Iterator[Recording]:
    """Capture only what happens inside the block::

    with spyre_sim.telemetry.record() as rec:
        model(input_ids)
    rec.snapshot["fallbacks"]
    """
    rec = Recording()
    before = snapshot()
    try:
        yield rec
    finally:
        rec.snapshot = diff(snapshot(), before)
