"""Proof of retirement: run a retirable adapter's families at the release *without* it.

``spyre-adapters audit --verify`` calls :func:`verify_retirable` for the audited release. For
each adapter whose status is ``retirable`` or ``retired`` (scaffolding whose every gap the
catalogue says is closed), every family its manifest lists as verified is built from its
config (:mod:`spyre_adapters.enablement.families`, realistic sizes), prepared for the release with every
other adapter the lifecycle resolves there (same auto-retire setting as the audit), run on the
emulated device with layout checks on, and compared with the CPU reference (the criteria of
:mod:`spyre_adapters.enablement.triage`). A family that fails is run again with the adapter kept. Each
family ends in one :class:`Evidence`:

- ``proves``: it runs and matches without the adapter;
- ``needs-adapter``: it fails without the adapter and passes with it: retiring would break it;
- ``blocked``: it fails with the adapter kept too (another gap stops it first), so it says
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

__all__ = [
    "Evidence",
    "FamilyCheck",
    "Outcome",
    "RetirementVerdict",
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
        }


def _without(registry: Registry, name: str) -> Registry:
    """A registry with every manifest of ``registry`` except the versions of ``name``."""
    reduced = Registry(registry.catalogue)
    reduced.add_all(
        (m for m in registry.manifests() if m.name != name), source="verify: without " + name
    )
    return reduced


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
    reduced = _without(registry, manifest.name)
    checks = []
    for family in manifest.families:
        checks.append(_check_family(family, release, registry, reduced, auto_retire, preset))
        if checks[-1].evidence is Evidence.UNBUILDABLE or preset != REALISTIC:
            continue
        for variant in variants_for(family, base=preset, variants=variants):
            checks.append(_check_family(family, release, registry, reduced, auto_retire, variant))
    version = str(manifest.version)
    if not checks:
        detail = "its manifest lists no verified families, so there is nothing to run"
        return RetirementVerdict(manifest.name, version, name, Outcome.UNPROVEN, detail)
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
        runs = "family runs" if len(proving) == 1 else "families run"
        detail = f"{len(proving)} {runs} and match without it at {name}: " + ", ".join(
            c.label for c in proving
        )
        if others:
            detail += f"; {len(others)} prove nothing either way here: {listed}"
    return RetirementVerdict(manifest.name, version, name, outcome, detail, tuple(checks))


def _check_family(
    family: str,
    release: Any,
    registry: Registry,
    reduced: Registry,
    auto_retire: bool,
    preset: SizePreset,
) -> FamilyCheck:
    sizes = preset.name
    try:
        built = build_family(family, preset=preset)
    except FamilyBuildError as exc:
        return FamilyCheck(family, Evidence.UNBUILDABLE, f"cannot be built here: {exc}", sizes)
    run = run_on_device(built, release, adapters=True, registry=reduced, auto_retire=auto_retire)
    if run.ok:
        return FamilyCheck(family, Evidence.PROVES, _describe(run), sizes)
    # Is retiring it the cause? The same family with the adapter kept.
    kept = run_on_device(built, release, adapters=True, registry=registry, auto_retire=False)
    if kept.ok:
        detail = (
            f"{_describe(run)}; it passes with the adapter kept, so the adapter is still needed"
        )
        return FamilyCheck(family, Evidence.NEEDS_ADAPTER, detail, sizes)
    detail = f"blocked by something else, with the adapter kept too ({_describe(kept)})"
    return FamilyCheck(family, Evidence.BLOCKED, detail, sizes)


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
