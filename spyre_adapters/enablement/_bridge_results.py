"""What the bridge loop reports: a :class:`BridgeResult` per family and release, with each op
bridged (:class:`BridgedOp`, the candidate and its verdicts) and each thing that could not be
(:class:`Unbridged`, with the reason). See :mod:`spyre_adapters.enablement.bridge`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spyre_adapters.enablement.op_samples import Sample
from spyre_adapters.enablement.op_validation import Verdict
from spyre_adapters.enablement.results import DeviceRun

__all__ = ["BridgeResult", "BridgedOp", "Unbridged"]


@dataclass(frozen=True)
class BridgedOp:
    """An op that stopped the family, and the candidate that bridges it.

    ``adapter`` is the installed generated adapter that already bridged it (re-validated on
    this family's arguments), or ``None`` for an op bridged here; ``verdicts`` are the
    candidates tried, in order, the last one the one kept; ``samples`` the signatures of the
    captured arguments.
    """

    op: str
    gap: str
    module_path: str | None
    candidate: str
    verdicts: tuple[Verdict, ...]
    samples: tuple[str, ...]
    adapter: str | None = None
    captured: tuple[Sample, ...] = field(default=(), compare=False, repr=False)

    @property
    def holds(self) -> bool:
        return bool(self.verdicts) and self.verdicts[-1].holds

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "gap": self.gap,
            "module_path": self.module_path,
            "candidate": self.candidate,
            "adapter": self.adapter,
            "holds": self.holds,
            "samples": list(self.samples),
            "verdicts": [v.to_json() for v in self.verdicts],
        }


@dataclass(frozen=True)
class Unbridged:
    """What stopped the family and could not be bridged. ``why``: ``layout`` (a layout rule:
    adapters that change the model's layout, not an op's form, answer it), ``view`` (the op
    returns a view: another form would be a copy), ``outside-model-scope`` (the op ran in the
    harness), ``not-an-op-call`` (a storage rule met while moving a tensor), ``no-candidate``
    (every candidate failed: ``verdicts`` says how), ``device-error`` (not a lowering error)."""

    gap: str | None
    op: str | None
    module_path: str | None
    why: str
    detail: str
    verdicts: tuple[Verdict, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "gap": self.gap,
            "op": self.op,
            "module_path": self.module_path,
            "why": self.why,
            "detail": self.detail,
            "verdicts": [v.to_json() for v in self.verdicts],
        }


@dataclass
class BridgeResult:
    """The outcome of :func:`bridge_family` for one family at one release.

    ``outcome``: ``bridged`` (runs and matches the CPU with the bridges kept here),
    ``runs`` (runs and matches the CPU with what is installed: nothing new to bridge),
    ``mismatch`` (runs with the bridges but does not match the CPU), ``unbridged`` (something
    could not be bridged: see ``unbridged``), ``reuse-failed`` (an installed bridge does not
    hold on this family's arguments), ``not-judged`` (runs, but the CPU reference does not
    reproduce: two CPU forwards of the stock model differ, so no device run could match it).
    """

    family: str
    release: str
    preset: str
    outcome: str
    detail: str
    bridged: list[BridgedOp] = field(default_factory=list)
    unbridged: list[Unbridged] = field(default_factory=list)
    run: DeviceRun | None = None
    rounds: int = 0
    seconds: float = 0.0

    @property
    def table(self) -> dict[str, str]:
        """The ops bridged here (not the installed ones) and their candidates."""
        return {b.op: b.candidate for b in self.bridged if b.adapter is None}

    @property
    def enabled(self) -> bool:
        return self.outcome in ("bridged", "runs")

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        run = None if self.run is None else asdict(self.run)
        return {
            "family": self.family,
            "release": self.release,
            "preset": self.preset,
            "outcome": self.outcome,
            "enabled": self.enabled,
            "detail": self.detail,
            "table": self.table,
            "bridged": [b.to_json() for b in self.bridged],
            "unbridged": [u.to_json() for u in self.unbridged],
            "run": run,
            "rounds": self.rounds,
            "seconds": round(self.seconds, 3),
        }
