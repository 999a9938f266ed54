"""Proof of retirement: run a retirable adapter's families at the release *without* it.

``spyre-adapters audit --verify`` calls :func:`verify_retirable` for the audited release. For
each adapter whose status is ``retirable`` or ``retired`` (scaffolding whose every gap the
catalogue says is closed), every family its manifest lists as verified is built from its
config (:mod:`spyre_adapters.families`, realistic sizes), prepared for the release with every
other adapter the lifecycle resolves there (same auto-retire setting as the audit), run on the
emulated device with layout checks on, and compared with the CPU reference (the criteria of
:mod:`spyre_adapters.triage`). The adapter is **verified retirable** only when every family
runs and matches; otherwise the verdict says what failed: the gap, op and module path of a
lowering error, the comparison numbers of a mismatch, or why a family could not be built —
and, for a failing family, whether it passes with the adapter kept (the adapter is still
needed) or fails anyway (the family is blocked by something else at that release).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spyre_adapters.families import REALISTIC, FamilyBuildError, SizePreset, build_family
from spyre_adapters.lifecycle import Status
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry
from spyre_adapters.triage import DeviceRun, run_on_device

__all__ = ["FamilyCheck", "RetirementVerdict", "verify_adapter", "verify_retirable"]


@dataclass(frozen=True)
class FamilyCheck:
    """One verified family run at the release without the adapter."""

    family: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class RetirementVerdict:
    """``verified``: every listed family ran and matched without ``adapter``."""

    adapter: str
    version: str
    release: str
    verified: bool
    detail: str
    families: tuple[FamilyCheck, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "version": self.version,
            "release": self.release,
            "verified": self.verified,
            "detail": self.detail,
            "families": [vars(check) for check in self.families],
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
) -> RetirementVerdict:
    """Run ``manifest``'s verified families at ``release`` without that adapter."""
    name = release if isinstance(release, str) else release.name
    reduced = _without(registry, manifest.name)
    checks = []
    for family in manifest.families:
        try:
            built = build_family(family, preset=preset)
        except FamilyBuildError as exc:
            checks.append(FamilyCheck(family, False, f"cannot verify: {exc}"))
            continue
        run = run_on_device(
            built, release, adapters=True, registry=reduced, auto_retire=auto_retire
        )
        detail = _describe(run)
        if not run.ok:
            # Say whether retiring it is the cause: the same family with the adapter kept.
            kept = run_on_device(
                built, release, adapters=True, registry=registry, auto_retire=False
            )
            detail += (
                "; it passes with the adapter kept, so the adapter is still needed"
                if kept.ok
                else f"; it fails with the adapter kept too ({_describe(kept)}): the family "
                "is blocked by something else at this release; drop it from `families` or "
                "fix that first"
            )
        checks.append(FamilyCheck(family, run.ok, detail))
    if not checks:
        detail = "its manifest lists no verified families, so there is nothing to run"
        return RetirementVerdict(manifest.name, str(manifest.version), name, False, detail)
    failed = [c for c in checks if not c.passed]
    if failed:
        detail = "; ".join(f"{c.family}: {c.detail}" for c in failed)
    else:
        detail = f"{len(checks)} families run and match without it at {name}: " + ", ".join(
            c.family for c in checks
        )
    return RetirementVerdict(
        manifest.name, str(manifest.version), name, not failed, detail, tuple(checks)
    )


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
