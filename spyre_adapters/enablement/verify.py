"""Proof of retirement: run a retirable adapter's families at the release *without* it.

``spyre-adapters audit --verify`` calls :func:`verify_retirable` for the audited release. For
each adapter whose status is ``retirable`` or ``retired`` (scaffolding whose every gap the
catalogue says is closed), every family its manifest lists as verified is built from its
config (:mod:`spyre_adapters.enablement.families`, realistic sizes), prepared for the release with every
other adapter the lifecycle resolves there (same auto-retire setting as the audit), run on the
emulated device with layout checks on, and compared with the CPU reference (the criteria of
:mod:`spyre_adapters.enablement.triage`). A family that fails is run again with the adapter kept.

The run without the adapter also leaves out its **stand-ins**: the other installed adapters that
cover one of its gaps (:func:`stand_ins`; two op bridges stand in for each other only when they
bridge the same op). Otherwise a stand-in that keeps the gap away would pass for the release
closing it (``rotate-half-matmul`` computes the rotate-half that ``rope-rotation`` also covers,
so a Llama without rope-rotation ran and matched at a release that still miscompiles it). When
that run fails and the one with everything kept passes, the family is run once more without
the adapter but with its stand-ins, to tell an adapter still needed from a gap the stand-ins
keep away. Each family ends in one :class:`Evidence`:

- ``proves``: it runs and matches without the adapter and its stand-ins;
- ``needs-adapter``: it fails without them and passes with them: retiring would break it, or it
  runs only because a stand-in keeps one of the adapter's gaps away (the release does not close
  it, whatever the catalogue says; the detail names the stand-ins);
- ``blocked``: it fails with the adapter kept too (another gap stops it first), or, without the
  adapter, only where a stand-in covers a gap of its own that is not the adapter's, so it says
  nothing about this adapter either way;
- ``unbuildable``: it could not be built from its config here.

Each family is checked at the realistic sizes and again at every size variant that builds it
differently (:data:`spyre_adapters.enablement.size_presets.VARIANTS`: one key/value head; odd batch, sequence
and vocabulary sizes), each check with its own evidence (``preset`` names the sizes): an
adapter that one of them still needs is not retirable.

The verdict's :class:`Outcome` is ``verified`` when no family needs the adapter and at least
one proves it can go, ``refuted`` when some family needs it, and ``unproven`` when no family
could show either (all blocked or unbuildable, or none listed). Only ``verified`` passes the
audit gate. The detail says, per family that did not prove it, the gap, op and module path of
a lowering error, the comparison numbers of a mismatch, or why it could not be built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from spyre_adapters.enablement.device_runs import run_on_device
from spyre_adapters.enablement.families import build_family
from spyre_adapters.enablement.family_configs import variants_for
from spyre_adapters.enablement.results import DeviceRun
from spyre_adapters.enablement.size_presets import REALISTIC, VARIANTS, FamilyBuildError, SizePreset
from spyre_adapters.lifecycle import Status
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_sim.catalogue import packet_of

__all__ = [
    "Evidence",
    "FamilyCheck",
    "Outcome",
    "RetirementVerdict",
    "stand_ins",
    "verify_adapter",
    "verify_retirable",
]


class Evidence(str, Enum):
    """What one family's runs say about retiring the adapter (see the module docstring)."""

    PROVES = "proves"
    NEEDS_ADAPTER = "needs-adapter"
    BLOCKED = "blocked"
    UNBUILDABLE = "unbuildable"


class Outcome(str, Enum):
    """The verdict on retiring one adapter at one release (see the module docstring)."""

    VERIFIED = "verified"
    REFUTED = "refuted"
    UNPROVEN = "unproven"


@dataclass(frozen=True)
class FamilyCheck:
    """One verified family run at the release without the adapter."""

    family: str
    evidence: Evidence
    detail: str
    preset: str = REALISTIC.name

    @property
    def passed(self) -> bool:
        """It ran and matched without the adapter."""
        return self.evidence is Evidence.PROVES

    @property
    def label(self) -> str:
        """The family, with the size variant when it is not the realistic preset."""
        return self.family if self.preset == REALISTIC.name else f"{self.family} ({self.preset})"

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "preset": self.preset,
            "evidence": self.evidence.value,
            "passed": self.passed,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class RetirementVerdict:
    """The proof (or not) that ``adapter`` can be retired at ``release``."""

    adapter: str
    version: str
    release: str
    outcome: Outcome
    detail: str
    families: tuple[FamilyCheck, ...] = field(default=())
    stand_ins: tuple[str, ...] = ()
    """The other adapters covering one of its gaps, left out of the runs without it."""

    @property
    def verified(self) -> bool:
        """No family needs the adapter and at least one runs and matches without it."""
        return self.outcome is Outcome.VERIFIED

    def to_json(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "version": self.version,
            "release": self.release,
            "verified": self.verified,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "families": [check.to_json() for check in self.families],
            "stand_ins": list(self.stand_ins),
        }


def _stands_in(other: Manifest, manifest: Manifest) -> bool:
    if other.bridges and manifest.bridges:  # two op bridges: only the same op
        return bool({b.op for b in other.bridges} & {b.op for b in manifest.bridges})
    return bool(set(other.gaps) & set(manifest.gaps))


def stand_ins(manifest: Manifest, registry: Registry) -> tuple[str, ...]:
    """The names of the other adapters of ``registry`` that cover one of ``manifest``'s gaps
    (any of their installed versions), sorted: left out with it when its retirement is
    proved, so none of them keeps its gap away in its place."""
    return tuple(
        sorted(
            {
                other.name
                for other in registry.manifests()
                if other.name != manifest.name and _stands_in(other, manifest)
            }
        )
    )


def _without(registry: Registry, names: frozenset[str]) -> Registry:
    """A registry with every manifest of ``registry`` except the versions of ``names``."""
    return registry.where(
        lambda m: m.name not in names, source="verify: without " + ", ".join(sorted(names))
    )


def _describe(run: DeviceRun) -> str:
    if run.error is not None:
        error = run.error
        if error.kind == "lowering":
            return (
                f"gap `{error.gap}`: {error.op} in {error.module_path or 'the model'} "
                "does not lower"
            )
        return f"{error.kind} error: {error.message.splitlines()[0]}"
    comparison = run.comparison
    if comparison is None:
        return "no output to compare"
    if comparison.matches:
        return f"runs and matches the CPU (cosine {comparison.cosine:.5f})"
    misc = f"; miscompiles: {', '.join(run.miscompiles)}" if run.miscompiles else ""
    return (
        f"runs but does not match the CPU (cosine {comparison.cosine:.5f}, top-1 "
        f"{comparison.top1}, {comparison.criterion}){misc}"
    )


def verify_adapter(
    manifest: Manifest,
    release: Any,
    registry: Registry,
    *,
    auto_retire: bool = True,
    preset: SizePreset = REALISTIC,
    variants: tuple[SizePreset, ...] = VARIANTS,
) -> RetirementVerdict:
    """Run ``manifest``'s verified families at ``release`` without that adapter, at
    ``preset`` and at each of ``variants`` that builds a family differently (none for a
    preset other than the realistic one)."""
    name = release if isinstance(release, str) else release.name
    standing = stand_ins(manifest, registry)
    runs = _Runs(
        manifest,
        release,
        registry,
        bare=_without(registry, frozenset((manifest.name, *standing))),
        helped=_without(registry, frozenset((manifest.name,))) if standing else None,
        stand_ins=standing,
        auto_retire=auto_retire,
    )
    checks = []
    for family in manifest.families:
        checks.append(runs.check(family, preset))
        if checks[-1].evidence is Evidence.UNBUILDABLE or preset != REALISTIC:
            continue
        for variant in variants_for(family, base=preset, variants=variants):
            checks.append(runs.check(family, variant))
    version = str(manifest.version)
    if not checks:
        detail = "its manifest lists no verified families, so there is nothing to run"
        return RetirementVerdict(
            manifest.name, version, name, Outcome.UNPROVEN, detail, stand_ins=standing
        )
    by = {e: [c for c in checks if c.evidence is e] for e in Evidence}
    others = [c for c in checks if not c.passed]
    listed = "; ".join(f"{c.label}: {c.detail}" for c in others)
    if by[Evidence.NEEDS_ADAPTER]:
        outcome, detail = Outcome.REFUTED, listed
    elif not by[Evidence.PROVES]:
        outcome = Outcome.UNPROVEN
        detail = f"no listed family can run at {name}, with or without it: {listed}"
    else:
        outcome = Outcome.VERIFIED
        proving = by[Evidence.PROVES]
        families = "family runs" if len(proving) == 1 else "families run"
        without = f"without it and {_listing(runs.stand_ins)}" if runs.stand_ins else "without it"
        detail = f"{len(proving)} {families} and match {without} at {name}: " + ", ".join(
            c.label for c in proving
        )
        if others:
            detail += f"; {len(others)} prove nothing either way here: {listed}"
    return RetirementVerdict(
        manifest.name, version, name, outcome, detail, tuple(checks), stand_ins=runs.stand_ins
    )


def _listing(names: tuple[str, ...]) -> str:
    """``its stand-in a`` / ``its stand-ins a, b`` (adapters covering a gap of it too)."""
    return f"its stand-in{'s' if len(names) > 1 else ''} {', '.join(names)}"


@dataclass(frozen=True)
class _Runs:
    """The registries one adapter's retirement is checked with: ``bare`` without it and its
    stand-ins, ``helped`` without it only (``None``: it has no stand-ins), ``registry`` with
    everything kept."""

    manifest: Manifest
    release: Any
    registry: Registry
    bare: Registry
    helped: Registry | None
    stand_ins: tuple[str, ...]
    auto_retire: bool

    def _run(self, built: Any, registry: Registry, auto_retire: bool) -> DeviceRun:
        return run_on_device(
            built, self.release, adapters=True, registry=registry, auto_retire=auto_retire
        )

    def check(self, family: str, preset: SizePreset) -> FamilyCheck:
        sizes = preset.name
        try:
            built = build_family(family, preset=preset)
        except FamilyBuildError as exc:
            return FamilyCheck(family, Evidence.UNBUILDABLE, f"cannot be built here: {exc}", sizes)
        run = self._run(built, self.bare, self.auto_retire)
        if run.ok:
            return FamilyCheck(family, Evidence.PROVES, _describe(run), sizes)
        # Is retiring it the cause? The same family with the adapter kept.
        kept = self._run(built, self.registry, False)
        if not kept.ok:
            detail = f"blocked by something else, with the adapter kept too ({_describe(kept)})"
            return FamilyCheck(family, Evidence.BLOCKED, detail, sizes)
        if self.helped is None:
            detail = (
                f"{_describe(run)}; it passes with the adapter kept, so the adapter is still needed"
            )
            return FamilyCheck(family, Evidence.NEEDS_ADAPTER, detail, sizes)
        helped = self._run(built, self.helped, self.auto_retire)
        if not helped.ok:
            bare, with_them = _describe(run), _describe(helped)
            also = (
                f"the same without {_listing(self.stand_ins)}"
                if bare == with_them
                else f"without {_listing(self.stand_ins)} too: {bare}"
            )
            detail = (
                f"{with_them}; it passes with the adapter kept, so the adapter is still needed "
                f"({also})"
            )
            return FamilyCheck(family, Evidence.NEEDS_ADAPTER, detail, sizes)
        if self._stopped_elsewhere(run):
            detail = (
                f"without it and {_listing(self.stand_ins)}: {_describe(run)}, a gap they cover "
                "that is not the adapter's; with them it runs, so it says nothing either way"
            )
            return FamilyCheck(family, Evidence.BLOCKED, detail, sizes)
        keep = "they keep" if len(self.stand_ins) > 1 else "it keeps"
        detail = (
            f"without it and {_listing(self.stand_ins)}: {_describe(run)}; it passes with "
            f"{'them' if len(self.stand_ins) > 1 else 'it'} kept, so {keep} away a gap of the "
            "adapter that the release does not close: still needed"
        )
        return FamilyCheck(family, Evidence.NEEDS_ADAPTER, detail, sizes)

    def _stopped_elsewhere(self, run: DeviceRun) -> bool:
        """Whether the run without the adapter and its stand-ins stopped only at a gap that is
        not the adapter's (a lowering error, or miscompiles, of other gaps only)."""
        gaps = set(self.manifest.gaps)
        if run.error is not None:
            if run.error.kind != "lowering":
                return False
            if self.manifest.bridges:  # an op bridge covers its ops, not the whole gap
                op = run.error.op
                return op is None or packet_of(op) not in {
                    packet_of(b.op) for b in self.manifest.bridges
                }
            return run.error.gap not in gaps
        return bool(run.miscompiles) and not gaps & set(run.miscompiles)


def verify_retirable(report: Any, release: Any, registry: Registry) -> Iterable[RetirementVerdict]:
    """Verdicts for every ``retirable``/``retired`` adapter of an audit report (see module doc).

    ``report`` is a :class:`~spyre_adapters.audit.AuditReport` (its ``rows`` and
    ``auto_retire`` are read), ``release`` the release object (or name) it was made for.
    """
    verdicts = []
    for row in report.rows:
        if row.status not in (Status.RETIRABLE, Status.RETIRED):
            continue
        verdicts.append(
            verify_adapter(row.manifest, release, registry, auto_retire=report.auto_retire)
        )
    return verdicts
