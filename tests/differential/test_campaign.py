"""The differential campaign (slow): drawn configurations of every adapter's families, at
every release, each in an isolated worker. ``pytest -m slow tests/differential``.

``SPYRE_DIFFERENTIAL_CONFIGS`` sets the configurations per family (default 4) and
``SPYRE_DIFFERENTIAL_JOBS`` the workers at a time (default 1). The full campaign with its
printed figures is ``python benchmarks/campaign_differential.py``.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from spyre_adapters import default_registry
from spyre_adapters.enablement.differential import Outcome, adapter_families, campaign, drawn_cases

pytestmark = pytest.mark.slow


def test_every_run_matches_raises_or_is_flagged() -> None:
    from spyre_sim import builtin_catalogue

    count = int(os.environ.get("SPYRE_DIFFERENTIAL_CONFIGS", "4"))
    jobs = int(os.environ.get("SPYRE_DIFFERENTIAL_JOBS", "1"))
    families = sorted({f for fams in adapter_families(default_registry()).values() for f in fams})
    cases = [case for family in families for case in drawn_cases(family, count)]
    releases = builtin_catalogue().names
    results = list(campaign(cases, releases, jobs=jobs))
    runs = [run for result in results if result.built for run in result.runs]
    outcomes = Counter(run.outcome.value for run in runs)
    print(f"{len(runs)} runs of {len(cases)} configurations x {len(releases)} releases: {outcomes}")
    assert runs
    assert outcomes[Outcome.MATCH.value] > 0
    bad = [
        f"{run.outcome.value} at {run.release}: {run.case.describe()}: {run.detail}"
        for run in runs
        if not run.outcome.acceptable
    ]
    assert not bad, "\n".join(bad)
