"""Triage: what does it take to run a Transformers family on a stack release?

For a family (a ``model_type``) and a release R, :func:`triage_family` builds a small instance
from its config (:mod:`spyre_adapters.enablement.families`), records the CPU reference, and
runs a forward on the emulated ``spyre`` device at R
(:func:`~spyre_adapters.enablement.device_runs.run_on_device`) twice:

1. **stock**: the model as Transformers ships it (fp16 on the device);
2. **adapted**: after ``spyre_adapters.prepare(model, stack=R)`` (the adapters the lifecycle
   resolves for R, applied on the host before the move, as ``pytest --spyre`` does) — only when
   the stock run does not already run and match.

Each run records the gaps the device met (every gap on the path of a failing run, see
:mod:`spyre_adapters.enablement.device_runs`), the ops that fell back to the host, the
miscompiles, and, when it ran, the comparison with the CPU reference
(:mod:`spyre_adapters.agreement`: for a causal LM the CPU's greedy top-1 token at every
position the CPU does not leave tied, and for every output a cosine similarity >=
:data:`~spyre_adapters.agreement.MIN_COSINE`).

The verdict is a :class:`~spyre_adapters.enablement.results.Category` computed by
:func:`~spyre_adapters.enablement.classification.classify`, the one function the CLI, the
sweep and the pytest-xdist sweep items share; the result is a
:class:`~spyre_adapters.enablement.results.TriageResult`.

**Variants.** A family that is enabled at R (``native`` or ``adapted``) is also run at the size
variants of :data:`spyre_adapters.enablement.size_presets.VARIANTS` that build it differently (one
key/value head; a batch of 3 x 13 tokens with a vocabulary of 1000), stock if it is native,
adapted if it is adapted: a configuration the main preset does not exercise can still give a
wrong answer (one KV head did). Each is a ``VariantCheck`` in ``TriageResult.variants``, and a
failing one is named in the detail. The category stays the verdict on the main preset, so
the sweep's figures keep their meaning; ``TriageResult.variants_ok`` says whether every
variant passed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spyre_adapters.enablement.classification import classify, describe_run
from spyre_adapters.enablement.device_runs import run_on_device
from spyre_adapters.enablement.families import BuiltFamily
from spyre_adapters.enablement.family_configs import variants_for
from spyre_adapters.enablement.results import Category, GapHit, TriageResult, VariantCheck
from spyre_adapters.enablement.size_presets import REALISTIC, VARIANTS, FamilyBuildError, SizePreset
from spyre_adapters.enablement.skeletons import suggest_manifest

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry
    from spyre_sim.catalogue import Release

__all__ = ["build_variants", "triage", "triage_family"]


def _bridging(registry: Registry, gaps: Sequence[GapHit]) -> dict[str, list[str]]:
    return {
        gap: sorted({m.name for m in registry.bridging(gap)})
        for gap in sorted({h.gap for h in gaps})
    }


def triage(
    built: BuiltFamily,
    release: str | Release,
    *,
    registry: Registry | None = None,
    layout_checks: bool = True,
    list_all_gaps: bool = True,
    stock_all_gaps: bool = True,
    variants: Sequence[BuiltFamily] = (),
) -> TriageResult:
    """Triage an already built family at one release (a name, or a release object).

    ``list_all_gaps``: list every gap of a failing run, not only the first (costs one forward
    per gap); ``stock_all_gaps=False`` does so for the adapted run only (what blocks it).
    ``variants``: the same family built at size variants (:func:`build_variants`), checked
    when the family is enabled (see the module docstring).
    """
    from spyre_adapters import default_registry

    registry = default_registry() if registry is None else registry
    start = time.perf_counter()
    stock = run_on_device(
        built,
        release,
        adapters=False,
        layout_checks=layout_checks,
        list_all_gaps=list_all_gaps and stock_all_gaps,
    )
    adapted = None
    if not stock.ok:
        adapted = run_on_device(
            built,
            release,
            adapters=True,
            registry=registry,
            layout_checks=layout_checks,
            list_all_gaps=list_all_gaps,
        )
    met = stock.gaps + (adapted.gaps if adapted is not None else [])
    bridging = _bridging(registry, met)
    category, detail = classify(stock, adapted, bridging)
    if category is Category.MISMATCH:
        unjudged = built.not_judged(detail)
        if unjudged is not None:
            category, detail = Category.REFERENCE_FAILED, unjudged
    final = adapted if adapted is not None else stock
    blockers = [] if category.enabled else [h for h in final.gaps if h.raised]
    checks: list[VariantCheck] = []
    if category.enabled:
        checks = [_check_variant(v, release, category, registry, layout_checks) for v in variants]
        failed = [c for c in checks if not c.ok]
        if failed:
            detail += "; but at " + "; at ".join(f"{c.preset}: {c.detail}" for c in failed)
    name = release if isinstance(release, str) else release.name
    suggestions = {
        h.gap: suggest_manifest(h.gap, built.model_type, name, h)
        for h in blockers
        if not bridging.get(h.gap)
    }
    return TriageResult(
        family=built.model_type,
        release=name,
        preset=built.preset.name,
        category=category,
        detail=detail,
        kind=built.kind,
        stock=stock,
        adapted=adapted,
        bridging=bridging,
        blockers=blockers,
        suggestions=suggestions,
        seconds=time.perf_counter() - start,
        fit=built.fit,
        variants=checks,
    )


def _check_variant(
    variant: BuiltFamily,
    release: str | Release,
    category: Category,
    registry: Registry,
    layout_checks: bool,
) -> VariantCheck:
    adapted = category is Category.ADAPTED
    run = run_on_device(
        variant,
        release,
        adapters=adapted,
        registry=registry,
        layout_checks=layout_checks,
        list_all_gaps=False,
    )
    detail = describe_run(run, "with adapters" if adapted else "stock")
    return VariantCheck(variant.preset.name, run.ok, detail, tuple(run.miscompiles))


def build_variants(
    family: str, *, preset: SizePreset = REALISTIC, variants: Sequence[SizePreset] = VARIANTS
) -> list[BuiltFamily]:
    """``family`` built at each of ``variants`` that builds it differently from ``preset``
    (:func:`~spyre_adapters.enablement.family_configs.variants_for`); variants that do not build are left out.
    Only :data:`~spyre_adapters.enablement.size_presets.REALISTIC` has variants: for another preset, none."""
    from spyre_adapters.enablement.families import build_family

    if preset != REALISTIC:
        return []
    built = []
    for variant in variants_for(family, base=preset, variants=variants):
        try:
            built.append(build_family(family, preset=variant))
        except FamilyBuildError:
            continue
    return built


def triage_family(
    family: str,
    releases: Sequence[str],
    *,
    preset: SizePreset = REALISTIC,
    registry: Registry | None = None,
    layout_checks: bool = True,
    list_all_gaps: bool = True,
    stock_all_gaps: bool = True,
    variants: Sequence[SizePreset] = VARIANTS,
) -> list[TriageResult]:
    """Build ``family`` once (and at its ``variants``, see :func:`build_variants`) and triage
    it at each release. A family that does not build gets ``build-failed`` /
    ``reference-failed`` at every release."""
    from spyre_adapters.enablement.families import build_family

    start = time.perf_counter()
    try:
        built = build_family(family, preset=preset)
    except FamilyBuildError as exc:
        failed_on_cpu = exc.stage in ("forward", "reference")
        category = Category.REFERENCE_FAILED if failed_on_cpu else Category.BUILD_FAILED
        seconds = (time.perf_counter() - start) / max(len(releases), 1)
        return [
            TriageResult(family, r, preset.name, category, str(exc), seconds=seconds)
            for r in releases
        ]
    variant_builds = build_variants(family, preset=preset, variants=variants)
    build_share = (time.perf_counter() - start) / max(len(releases), 1)
    results = []
    for release in releases:
        result = triage(
            built,
            release,
            registry=registry,
            layout_checks=layout_checks,
            list_all_gaps=list_all_gaps,
            stock_all_gaps=stock_all_gaps,
            variants=variant_builds,
        )
        result.seconds += build_share
        results.append(result)
    return results
