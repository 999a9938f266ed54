"""The result model of triage: the verdict categories, one device run, one family at a release.

A :class:`TriageResult` is what :func:`spyre_adapters.enablement.triage.triage` returns for one
(family, release): the :class:`Category` (the verdict), the stock and adapted
:class:`DeviceRun` (each with the :class:`GapHit` list, its :class:`RunError` when it did not
complete, and its :class:`~spyre_adapters.agreement.Comparison` with the CPU when it ran), and
the :class:`VariantCheck` of each size variant. Plain data: :meth:`TriageResult.to_json` and
:meth:`TriageResult.from_json` carry it across worker processes and into the sweep's JSON.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from spyre_adapters.agreement import Comparison

__all__ = ["Category", "DeviceRun", "GapHit", "RunError", "TriageResult", "VariantCheck"]


class Category(str, enum.Enum):
    """The verdict for one (family, release). Values are stable: never renamed, only added.

    - ``native``: the stock model runs on the device and matches the CPU; no adapter needed.
    - ``adapted``: the stock model fails or mismatches; with the resolved adapters it runs and
      matches.
    - ``blocked``: the adapted model still fails on a gap that no registered adapter bridges.
    - ``not-implemented-adapter``: the adapted model fails on a gap that a registered adapter
      bridges, but that adapter was not applied (it does not match this family's modules, or is
      not applied at this release).
    - ``mismatch``: the model runs (with the adapters) but does not match the CPU.
    - ``adapter-failed``: ``prepare`` raised (an adapter failed to apply).
    - ``device-error``: the device run raised something that is not a lowering error.
    - ``build-failed``: the family does not instantiate from its config (or no inputs for it).
    - ``reference-failed``: the family instantiates but its CPU forward fails, or gives an
      output no fp16 run can be judged against (too few values, or all of them vanishing).
    - ``worker-crashed``: the isolated worker process died (signal, abort, out of memory).
    - ``worker-timeout``: the isolated worker process exceeded its time limit and was killed.
    - ``internal-error``: the triage code itself raised in the worker (a bug to report).
    """

    NATIVE = "native"
    ADAPTED = "adapted"
    BLOCKED = "blocked"
    NOT_IMPLEMENTED_ADAPTER = "not-implemented-adapter"
    MISMATCH = "mismatch"
    ADAPTER_FAILED = "adapter-failed"
    DEVICE_ERROR = "device-error"
    BUILD_FAILED = "build-failed"
    REFERENCE_FAILED = "reference-failed"
    WORKER_CRASHED = "worker-crashed"
    WORKER_TIMEOUT = "worker-timeout"
    INTERNAL_ERROR = "internal-error"

    @property
    def enabled(self) -> bool:
        """The family runs and matches at this release (with or without adapters)."""
        return self in (Category.NATIVE, Category.ADAPTED)

    @property
    def built(self) -> bool:
        """The family built and ran on the CPU (it counts in coverage denominators)."""
        return self not in (
            Category.BUILD_FAILED,
            Category.REFERENCE_FAILED,
            Category.WORKER_CRASHED,
            Category.WORKER_TIMEOUT,
            Category.INTERNAL_ERROR,
        )


@dataclass(frozen=True)
class GapHit:
    """A gap the device met: the op, where in the model, how often, and whether it raised."""

    gap: str
    op: str | None
    module_path: str | None
    count: int = 1
    raised: bool = False


@dataclass(frozen=True)
class RunError:
    """Why a run did not complete. ``kind``: ``lowering`` (a ``SpyreLoweringError``, with
    ``gap``/``op``/``module_path``), ``prepare`` (an adapter failed to apply) or ``other``."""

    kind: str
    type: str
    message: str
    gap: str | None = None
    op: str | None = None
    module_path: str | None = None


@dataclass
class DeviceRun:
    """One forward on the device: stock (``adapters`` empty) or adapted."""

    ran: bool
    error: RunError | None = None
    gaps: list[GapHit] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)
    miscompiles: list[str] = field(default_factory=list)
    comparison: Comparison | None = None
    adapters: list[str] = field(default_factory=list)
    not_applied: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    all_gaps_listed: bool = False
    bridged: dict[str, int] = field(default_factory=dict)
    idle: list[str] = field(default_factory=list)
    miscompiled_in: dict[str, list[str]] = field(default_factory=dict)
    """gap -> the module paths the miscompiles of that gap happened in (``""``: outside any
    module forward)."""
    touched: dict[str, list[str]] = field(default_factory=dict)
    """adapter label -> the module paths it changed in this model."""
    rounding_ties: dict[str, int] = field(default_factory=dict)
    """op -> rows of selections inside the model (a router's top-k) the device decided between
    values within one DL16 step (``spyre_sim.telemetry``'s ``rounding_ties``)."""
    replayed: Comparison | None = None
    """A run that did not match with such rows, run again with the CPU's top-k choice at them
    (``spyre_sim.selections``): matching then, rounding's choice was the whole difference."""
    replayed_rows: int = 0
    """The rows that replay gave the CPU's choice."""
    emulator_limits: dict[str, int] = field(default_factory=dict)
    """kind -> results the emulator could not compute as the device does (``spyre_sim.telemetry``'s
    ``emulator_limits``: ``fp16-range``, a DL16 number beyond what its fp16 host tensors hold).
    A mismatch with such results is the emulator's limit, not the device's answer."""

    def covers(self, label: str, gap: str) -> bool:
        """Whether a miscompile of ``gap`` happened where the adapter ``label`` changed the
        model: in a module it touched or below one. Where either side is not known (a
        miscompile outside any module, an adapter that records no module), it is taken to."""
        touched = self.touched.get(label, [])
        places = self.miscompiled_in.get(gap, [])
        if not touched or not places or "" in touched:
            return True
        return any(
            place == path or place.startswith(path + ".") for place in places for path in touched
        )

    @property
    def working(self) -> list[str]:
        """The adapters applied, without the op bridges that computed no call in this run
        (a bridge matches every model, and changes only a model that reaches its ops)."""
        return [a for a in self.adapters if a not in self.idle]

    @property
    def ok(self) -> bool:
        """It ran and matched the CPU."""
        return self.ran and self.comparison is not None and self.comparison.matches


@dataclass(frozen=True)
class VariantCheck:
    """The family at a size variant (``preset``), run as its main check passed: ``ok`` when
    it ran and matched the CPU; ``detail`` says how it went; ``miscompiles`` were recorded."""

    preset: str
    ok: bool
    detail: str
    miscompiles: tuple[str, ...] = ()


@dataclass
class TriageResult:
    """The triage of one family at one release (JSON: :meth:`to_json`)."""

    family: str
    release: str
    preset: str
    category: Category
    detail: str
    kind: str | None = None
    stock: DeviceRun | None = None
    adapted: DeviceRun | None = None
    bridging: dict[str, list[str]] = field(default_factory=dict)
    blockers: list[GapHit] = field(default_factory=list)
    suggestions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    fit: str | None = None
    variants: list[VariantCheck] = field(default_factory=list)

    @property
    def variants_ok(self) -> bool:
        """Every size variant checked passed (true when none was checked)."""
        return all(v.ok for v in self.variants)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-serialisable data (keys documented in
        :mod:`spyre_adapters.enablement._sweep_report`)."""
        data = asdict(self)
        data["category"] = self.category.value
        data["enabled"] = self.category.enabled
        data["variants_ok"] = self.variants_ok
        clean: dict[str, Any] = _finite(data)
        return clean

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TriageResult:
        """The inverse of :meth:`to_json`."""

        def run(raw: Mapping[str, Any] | None) -> DeviceRun | None:
            if raw is None:
                return None
            return DeviceRun(
                ran=raw["ran"],
                error=RunError(**raw["error"]) if raw.get("error") else None,
                gaps=[GapHit(**g) for g in raw.get("gaps", [])],
                fallbacks=dict(raw.get("fallbacks", {})),
                miscompiles=list(raw.get("miscompiles", [])),
                comparison=Comparison(**raw["comparison"]) if raw.get("comparison") else None,
                adapters=list(raw.get("adapters", [])),
                not_applied=dict(raw.get("not_applied", {})),
                seconds=raw.get("seconds", 0.0),
                all_gaps_listed=raw.get("all_gaps_listed", False),
                bridged=dict(raw.get("bridged", {})),
                idle=list(raw.get("idle", [])),
                miscompiled_in={k: list(v) for k, v in raw.get("miscompiled_in", {}).items()},
                touched={k: list(v) for k, v in raw.get("touched", {}).items()},
                rounding_ties=dict(raw.get("rounding_ties", {})),
                replayed=Comparison(**raw["replayed"]) if raw.get("replayed") else None,
                replayed_rows=int(raw.get("replayed_rows", 0)),
                emulator_limits=dict(raw.get("emulator_limits", {})),
            )

        return cls(
            family=data["family"],
            release=data["release"],
            preset=data["preset"],
            category=Category(data["category"]),
            detail=data["detail"],
            kind=data.get("kind"),
            stock=run(data.get("stock")),
            adapted=run(data.get("adapted")),
            bridging={k: list(v) for k, v in data.get("bridging", {}).items()},
            blockers=[GapHit(**g) for g in data.get("blockers", [])],
            suggestions=dict(data.get("suggestions", {})),
            seconds=data.get("seconds", 0.0),
            fit=data.get("fit"),
            variants=[
                VariantCheck(v["preset"], v["ok"], v["detail"], tuple(v.get("miscompiles", ())))
                for v in data.get("variants", [])
            ],
        )


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: replace them with ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
