"""Always-on counters of what the emulated device did, read as typed, frozen snapshots.

The hot path only bumps plain ``dict`` counters (held by :data:`spyre_sim.state.device_state`);
:func:`snapshot` turns them into a :class:`Snapshot`: frozen dataclasses, with an
:class:`OpDecision` for every counted decision::

    snap = spyre_sim.telemetry.snapshot()
    snap.ops["aten.mm.default"][OpDecision.NATIVE]      # 3
    snap.fallbacks["aten.arange.default"]                # 2
    snap.transfers.host_to_device_bytes
    snap.gaps["sin-cos"].count, snap.gaps["sin-cos"].modules
    snap.miscompiles, snap.errors, snap.emulator_limits, snap.rounding_ties, snap.nan_made

``gaps`` counts every op whose decision named a gap (fallback, decomposed, unsupported,
miscompiled, layout errors); ``errors`` counts the raised ones only. A gap's
``module_counts`` keeps :func:`diff` exact; ``modules`` is its sorted key list.
``emulator_limits`` counts results the emulator could not compute as the device does (a DL16
number its fp16 host tensors cannot hold): the emulator's limit, not the device's miscompile.
``rounding_ties`` counts, per op, the rows of a selection (a top-k, an argmax) that the device
decided between values within one DL16 step of each other (:mod:`spyre_sim._selection_ties`):
rounding may order such values either way, so the CPU may have chosen otherwise. A precision
fact, not an error: an MoE router's top-k over near-equal scores is the common case.
``nan_made`` counts, per op, results that hold NaN their operands did not (0/0 once DL16, which
has no subnormals, stored two tiny numbers as zero; :mod:`spyre_sim._nan_made`): the device's
number format, not a miscompile.

JSON is for the edges only (files, other processes): :meth:`Snapshot.to_json` writes schema
version 1, whose shape is :data:`JSON_SCHEMA` (a JSON Schema, as code), and
:meth:`Snapshot.from_json` reads it back (a document without ``module_counts`` counts each
listed module once). Snapshots from several processes combine with :func:`merge`;
:func:`diff` subtracts; :func:`record` captures what happened inside a ``with`` block.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spyre_sim.state import FLAT_COUNTS, MODULE_COUNTS, TRANSFER_KEYS, device_state

__all__ = [
    "JSON_SCHEMA",
    "SCHEMA_VERSION",
    "GapCount",
    "OpDecision",
    "Recording",
    "Snapshot",
    "Transfers",
    "diff",
    "merge",
    "record",
    "reset",
    "snapshot",
]

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
_emulator_limits = _counters.emulator_limits
_rounding_ties = _counters.rounding_ties
_nan_made = _counters.nan_made

_NO_MODULE = ""  # key used when an op ran outside any nn.Module forward


class OpDecision(enum.Enum):
    """What the device did with a counted op: a catalogue decision, or ``harness`` (an op of
    the test harness, run with host semantics: :mod:`spyre_sim.scope`)."""

    NATIVE = "native"
    DECOMPOSED = "decomposed"
    FALLBACK = "cpu-fallback"
    UNSUPPORTED = "unsupported"
    MISCOMPILED = "miscompiled"
    HARNESS = "harness"


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


def count_emulator_limit(kind: str, module_path: str | None) -> None:
    """Count one result the emulator computed differently from the device because it cannot
    hold a value the device holds (``kind``: ``"fp16-holder"``, a DL16 number below fp16's
    smallest subnormal, which the fp16 host tensors flush): not the device's miscompile."""
    _bump(_emulator_limits, kind, module_path)


def count_rounding_ties(op: str, module_path: str | None, rows: int) -> None:
    """Count ``rows`` rows of one ``op`` call whose selection the device decided between
    values within one DL16 step of each other (see :mod:`spyre_sim._selection_ties`)."""
    _bump(_rounding_ties, op, module_path, rows)


def count_nan_made(op: str, module_path: str | None) -> None:
    """Count one result of ``op`` that holds NaN its operands did not (see
    :mod:`spyre_sim._nan_made`)."""
    _bump(_nan_made, op, module_path)


def count_error(gap: str) -> None:
    """Count one raised lowering/layout error for ``gap``."""
    _errors[gap] = _errors.get(gap, 0) + 1


def _bump(table: dict[str, dict[str, int]], gap: str, module_path: str | None, n: int = 1) -> None:
    per_module = table.get(gap)
    if per_module is None:
        per_module = table[gap] = {}
    key = module_path or _NO_MODULE
    per_module[key] = per_module.get(key, 0) + n


def reset() -> None:
    """Forget every count (e.g. between tests; ``device_state.reset()`` does it too)."""
    _counters.clear()


# --- the typed snapshot ---------------------------------------------------------------------


@dataclass(frozen=True)
class Transfers:
    """Host<->device copies and their bytes."""

    host_to_device: int = 0
    device_to_host: int = 0
    host_to_device_bytes: int = 0
    device_to_host_bytes: int = 0


@dataclass(frozen=True)
class GapCount:
    """How often a gap was hit (or miscompiled), in total and per module path (``""``: outside
    any module forward)."""

    count: int
    module_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def modules(self) -> tuple[str, ...]:
        """The module paths that hit it, sorted (outside any forward is not listed)."""
        return tuple(sorted(m for m in self.module_counts if m != _NO_MODULE))

    @property
    def in_modules(self) -> int:
        """The count inside module forwards (outside any forward not counted)."""
        return sum(n for m, n in self.module_counts.items() if m != _NO_MODULE)


@dataclass(frozen=True)
class Snapshot:
    """The counts at one moment (or between two: :func:`diff`); see the module docstring."""

    ops: Mapping[str, Mapping[OpDecision, int]] = field(default_factory=dict)
    fallbacks: Mapping[str, int] = field(default_factory=dict)
    transfers: Transfers = Transfers()
    gaps: Mapping[str, GapCount] = field(default_factory=dict)
    miscompiles: Mapping[str, GapCount] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)
    #: results the emulator could not compute as the device does (see count_emulator_limit)
    emulator_limits: Mapping[str, GapCount] = field(default_factory=dict)
    #: rows of selections decided within one DL16 step, per op (see count_rounding_ties)
    rounding_ties: Mapping[str, GapCount] = field(default_factory=dict)
    #: results that hold NaN their operands did not, per op (see count_nan_made)
    nan_made: Mapping[str, GapCount] = field(default_factory=dict)

    def ops_decided(self, decision: OpDecision) -> int:
        """How many op executions got ``decision``."""
        return sum(by.get(decision, 0) for by in self.ops.values())

    def to_json(self) -> dict[str, Any]:
        """The snapshot as a JSON document of schema version 1 (:data:`JSON_SCHEMA`)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ops": {
                op: {d.value: n for d, n in sorted(by.items(), key=lambda i: i[0].value)}
                for op, by in sorted(self.ops.items())
            },
            "transfers": {key: getattr(self.transfers, key) for key in _TRANSFER_KEYS},
            **_fields(
                lambda name: dict(sorted(getattr(self, name).items())),
                lambda name: {k: _gap_json(e) for k, e in sorted(getattr(self, name).items())},
            ),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Snapshot:
        """A snapshot from a JSON document (:meth:`to_json`, another process, a file); a
        document of another schema version raises ``ValueError``."""
        version = doc.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"cannot read telemetry schema_version {version!r}; "
                f"this spyre_sim writes version {SCHEMA_VERSION}"
            )
        transfers = doc.get("transfers", {})
        return cls(
            ops={
                str(op): {OpDecision(d): int(n) for d, n in by.items()}
                for op, by in doc.get("ops", {}).items()
            },
            transfers=Transfers(**{k: int(transfers.get(k, 0)) for k in _TRANSFER_KEYS}),
            **_fields(
                lambda name: {str(k): int(n) for k, n in doc.get(name, {}).items()},
                lambda name: {str(k): _gap_from_json(e) for k, e in doc.get(name, {}).items()},
            ),
        )


def _fields(flat: Callable[[str], Any], per_module: Callable[[str], Any]) -> dict[str, Any]:
    """The :class:`Snapshot` fields named in :data:`~spyre_sim.state.FLAT_COUNTS` and
    :data:`~spyre_sim.state.MODULE_COUNTS`, each computed by the function for its kind: every
    reader and writer of a snapshot treats the counters of one kind alike."""
    return {name: flat(name) for name in FLAT_COUNTS} | {
        name: per_module(name) for name in MODULE_COUNTS
    }


def _gap_json(entry: GapCount) -> dict[str, Any]:
    named = {m: n for m, n in sorted(entry.module_counts.items()) if m != _NO_MODULE}
    return {"count": entry.count, "modules": list(named), "module_counts": named}


def _gap_from_json(entry: Mapping[str, Any]) -> GapCount:
    counts = entry.get("module_counts")
    if isinstance(counts, Mapping):
        per_module = {str(k): int(v) for k, v in counts.items()}
    else:  # written by hand or by an older tool: each listed module once
        per_module = {str(m): 1 for m in entry.get("modules", [])}
    return GapCount(int(entry.get("count", sum(per_module.values()))), per_module)


_COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "integer"}}
_GAP_ENTRY: dict[str, Any] = {
    "type": "object",
    "required": ["count", "modules"],
    "properties": {
        "count": {"type": "integer"},
        "modules": {"type": "array", "items": {"type": "string"}},
        "module_counts": _COUNTS,
    },
}

#: The JSON Schema of :meth:`Snapshot.to_json` (schema version 1).
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "spyre_sim telemetry snapshot",
    "type": "object",
    "required": ["schema_version", "ops", "transfers", *FLAT_COUNTS, *MODULE_COUNTS],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "ops": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "propertyNames": {"enum": [d.value for d in OpDecision]},
                "additionalProperties": {"type": "integer"},
            },
        },
        "transfers": {
            "type": "object",
            "required": list(_TRANSFER_KEYS),
            "properties": {key: {"type": "integer"} for key in _TRANSFER_KEYS},
        },
        **dict.fromkeys(FLAT_COUNTS, _COUNTS),
        **{name: {"type": "object", "additionalProperties": _GAP_ENTRY} for name in MODULE_COUNTS},
    },
}


def snapshot() -> Snapshot:
    """The counts so far."""
    ops: dict[str, dict[OpDecision, int]] = {}
    for (op, decision), n in sorted(_ops.items()):
        ops.setdefault(op, {})[OpDecision(decision)] = n
    return Snapshot(
        ops=ops,
        transfers=Transfers(**_transfers),
        **_fields(
            lambda name: dict(sorted(getattr(_counters, name).items())),
            lambda name: {
                k: GapCount(sum(m.values()), dict(m))
                for k, m in sorted(getattr(_counters, name).items())
            },
        ),
    )


def _add(a: Mapping[Any, int], b: Mapping[Any, int], sign: int) -> dict[Any, int]:
    out = dict(a)
    for key, n in b.items():
        out[key] = out.get(key, 0) + sign * n
    return {k: n for k, n in sorted(out.items(), key=lambda i: str(i[0])) if n}


def _add_gaps(
    a: Mapping[str, GapCount], b: Mapping[str, GapCount], sign: int
) -> dict[str, GapCount]:
    out: dict[str, GapCount] = {}
    for gap in sorted(set(a) | set(b)):
        mine, theirs = a.get(gap, GapCount(0)), b.get(gap, GapCount(0))
        count = mine.count + sign * theirs.count
        if count:
            per_module = _add(mine.module_counts, theirs.module_counts, sign)
            out[gap] = GapCount(count, {m: n for m, n in per_module.items() if n > 0})
    return out


def _combine(a: Snapshot, b: Snapshot, sign: int) -> Snapshot:
    ops: dict[str, dict[OpDecision, int]] = {}
    for op in sorted(set(a.ops) | set(b.ops)):
        by = _add(a.ops.get(op, {}), b.ops.get(op, {}), sign)
        if by:
            ops[op] = by
    transfers = Transfers(
        **{
            key: getattr(a.transfers, key) + sign * getattr(b.transfers, key)
            for key in _TRANSFER_KEYS
        }
    )
    return Snapshot(
        ops=ops,
        transfers=transfers,
        **_fields(
            lambda name: _add(getattr(a, name), getattr(b, name), sign),
            lambda name: _add_gaps(getattr(a, name), getattr(b, name), sign),
        ),
    )


def merge(*snapshots: Snapshot) -> Snapshot:
    """Add several snapshots (e.g. one per pytest-xdist worker) into one."""
    total = Snapshot()
    for snap in snapshots:
        total = _combine(total, snap, +1)
    return total


def diff(after: Snapshot, before: Snapshot) -> Snapshot:
    """What happened between two snapshots of the same process: ``after - before``."""
    return _combine(after, before, -1)


class Recording:
    """Handle yielded by :func:`record`; ``.snapshot`` is filled in when the block exits."""

    def __init__(self) -> None:
        self.snapshot: Snapshot = Snapshot()


@contextmanager
def record() -> Iterator[Recording]:
    """Capture only what happens inside the block::

    with spyre_sim.telemetry.record() as rec:
        model(input_ids)
    rec.snapshot.fallbacks
    """
    rec = Recording()
    before = snapshot()
    try:
        yield rec
    finally:
        rec.snapshot = diff(snapshot(), before)
