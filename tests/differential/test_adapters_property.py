"""Property: every adapter, on drawn configurations of its families, at every release where
it is applied, with all resolved adapters: the run matches the CPU, raises a device error, or
is flagged as a miscompile that no applied adapter claims to bridge. A silent mismatch, a
missed miscompile or any other error fails.

Drawn by Hypothesis from :data:`spyre_adapters.enablement.differential.SPACE` (one key/value head to
all, head_dim below / at / above a stick, partial rotary, tied embeddings, sliding windows,
odd vocabularies, batch and sequence sizes that are not multiples of 64, padding masks).
Derandomized: the same examples on every run, so CI is reproducible. The campaign
(``tests/differential/test_campaign.py``, ``benchmarks/campaign_differential.py``) draws many
more.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

from spyre_adapters import default_registry
from spyre_adapters.enablement.differential import (
    adapter_families,
    applied_releases,
    build_case,
    draw_case,
    run_case,
)
from spyre_adapters.enablement.families import candidate_families
from spyre_adapters.enablement.size_presets import FamilyBuildError

EXAMPLES_PER_ADAPTER = 3


def _releases() -> tuple[str, ...]:
    from spyre_sim import builtin_catalogue

    return builtin_catalogue().names


REGISTRY = default_registry()
#: Adapters whose families the family builder cannot build (no base-model class in the auto
#: mappings): nothing to draw here; their own tests run them on the stock models.
OWN_TESTS_ONLY = {
    "unfolded-gru-cell": "SLANet and SLANeXt: tests/library/test_unfolded_gru_cell.py",
    "bridge-topk": "SuperPoint: its captured samples, tests/library/test_generated_bridges.py",
}
_BUILDER = set(candidate_families())
LISTED = {name: fams for name, fams in adapter_families(REGISTRY).items() if fams}
FAMILIES = {
    name: drawable
    for name, fams in LISTED.items()
    if (drawable := tuple(f for f in fams if f in _BUILDER))
}
RELEASES = {name: applied_releases(REGISTRY, name, _releases()) for name in FAMILIES}


#: Generated op bridges change one op, validated on its captured and varied inputs at every
#: release (``tests/library/test_generated_bridges.py``); their families are whole vision,
#: MoE and state-space models at eight releases each. Drawn here only in the slow run
#: (``pytest -m slow``; the campaign draws them too), so the default suite stays in its time.
GENERATED = {m.name for m in REGISTRY.manifests() if m.generated}
ADAPTERS = [
    pytest.param(name, marks=pytest.mark.slow) if name in GENERATED else name
    for name in sorted(FAMILIES)
]


def test_every_adapter_with_families_is_drawn_or_named_as_tested_on_its_own() -> None:
    undrawn = {name for name in LISTED if name not in FAMILIES}
    assert undrawn == set(OWN_TESTS_ONLY), undrawn ^ set(OWN_TESTS_ONLY)


@pytest.mark.parametrize("adapter", ADAPTERS)
@settings(
    max_examples=EXAMPLES_PER_ADAPTER,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_adapted_runs_match_raise_or_are_flagged(adapter: str, data: Any) -> None:
    family = data.draw(st.sampled_from(FAMILIES[adapter]), label="family")
    case = draw_case(family, lambda options: data.draw(st.sampled_from(options)))
    note(case.describe())
    try:
        built = build_case(case)
    except FamilyBuildError as exc:
        event(f"not buildable: stage {exc.stage}")
        assume(False)
    failures = []
    for release in RELEASES[adapter]:
        run = run_case(case, built, release, registry=REGISTRY)
        event(run.outcome.value)
        event(
            f"{adapter} applied"
            if any(a.startswith(f"{adapter} ") for a in run.adapters)
            else f"{adapter} not applied"
        )
        if not run.outcome.acceptable:
            failures.append(
                f"{run.outcome.value} at {release}: {run.detail} (adapters: {', '.join(run.adapters)})"
            )
    assert not failures, f"{case.describe()}\n" + "\n".join(failures)
