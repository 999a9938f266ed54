"""Differential runs: a drawn configuration, adapted and run on the device, against the CPU.

An adapter must not change what a model computes, and what runs on the device must match the
CPU, raise, or be reported as a miscompile. Checking that on the two or three configurations
a test suite happens to build is how a wrong answer got through: one key/value head made
Transformers' ``repeat_kv`` return a stride-0 view that SDPA misread. So this module draws
configurations instead.

A :class:`Case` is one drawn configuration of a family: sizes (a
:class:`~spyre_adapters.enablement.size_presets.SizePreset`: heads, key/value heads, head_dim, FFN and
vocabulary sizes, layers, batch and sequence length, image geometry), config
:class:`~spyre_adapters.enablement.size_presets.Features` (partial rotary, tied embeddings, sliding window),
the attention implementation, padding of the batch, whether one decode step with the KV cache
follows the prefill (causal LMs), and a weight seed. :func:`draw_case` draws
one from :data:`SPACE`. It takes the choice function as an argument, so a seeded
``random.Random`` (a campaign) and Hypothesis (a property test, with shrinking) draw from the
same space.

:func:`build_case` builds the family at those sizes (no download), redraws every weight
matrix from a seeded normal scaled by its fan-in, so that attention patterns and logits depend
on content and position and a wrong computation shows, and records the CPU reference of the
stock model in fp32. :func:`run_case` prepares a copy for a release with the adapters the
lifecycle resolves there (``prepare``, as ``pytest --spyre`` does), runs it on the emulated
device and compares it with the CPU by the triage metric
(:func:`spyre_adapters.agreement.compare`: greedy top-1 at every non-tied position and cosine >=
0.99 for causal LMs, cosine >= 0.99 otherwise). Only positions that hold a token are
compared: padded positions are free to differ. Each run ends in one :class:`Outcome`:

- ``match``: it ran and matched the CPU;
- ``raised``: the device refused it with a lowering or layout error naming its gap;
- ``flagged``: it ran and did not match, and the device's telemetry recorded a documented
  miscompile (the report says so) of a gap no applied adapter bridges; or it raised something
  other than a lowering error after such a miscompile, whose wrong numbers made the rest fail
  (FastSpeech2's durations summed by a miscompiled fp32 reduction size a 3.7 TB buffer);
- ``precision``: it ran and did not match, nothing was recorded, and a control shows the
  number format explains it: within cosine :data:`PRECISION_COSINE`, the same adapted model
  in fp16 with no fp32 anywhere fails on the CPU too, or the device run with DL16 rounding
  off (plain fp16 storage) matches; at any distance, the stock model on the CPU with every
  result rounded to DL16 fails too, and the device is at most twice as far off (see
  :func:`run_case`);
- ``missed``: it ran, and telemetry recorded a miscompile of a gap that an applied adapter
  says it bridges: the adapter let it through (whether or not the output still matched);
- ``silent-mismatch``: it ran and did not match, and nothing said so. This is the failure
  this module exists to find;
- ``cpu-mismatch``: the adapted model, run on the CPU in fp32, does not match the stock
  model: the adapters change what the model computes (checked at every release, also where
  the device raises);
- ``error``: something else raised (an adapter failed to apply, a torch error): loud, but a
  bug too.

Only the first four are acceptable.

A drawn configuration the family's config class rejects, whose CPU forward fails (BERT-style
LM heads do not decode with a cache), or whose CPU output cannot judge an fp16 run, is not a
run: :func:`build_case` raises :class:`~spyre_adapters.enablement.size_presets.FamilyBuildError`.

Campaigns: :func:`drawn_cases` gives the same cases of a family in every process and run
(seeded ``random.Random``), :func:`campaign` runs cases at releases, each case in an isolated
worker process (the sweep's), and :func:`adapter_families` / :func:`applied_releases` say
what to draw for an adapter and where it is applied.

This module runs campaigns and is the public face of differential runs: the case space and
drawing are in :mod:`spyre_adapters.enablement._differential_cases`, building a case in
:mod:`spyre_adapters.enablement._differential_build`, running and judging it in
:mod:`spyre_adapters.enablement._differential_runs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spyre_adapters.enablement._differential_build import build_case
from spyre_adapters.enablement._differential_cases import (
    SPACE,
    Case,
    Space,
    draw_case,
    drawn_cases,
)
from spyre_adapters.enablement._differential_cases import Choose as Choose
from spyre_adapters.enablement._differential_runs import (
    PRECISION_COSINE,
    CaseRun,
    Outcome,
    run_case,
)
from spyre_adapters.enablement._isolation import WorkerPool
from spyre_adapters.enablement.size_presets import FamilyBuildError

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry

__all__ = [
    "PRECISION_COSINE",
    "SPACE",
    "Case",
    "CaseResult",
    "CaseRun",
    "Outcome",
    "Space",
    "adapter_families",
    "applied_releases",
    "build_case",
    "campaign",
    "case_worker",
    "draw_case",
    "drawn_cases",
    "run_case",
]


# -- what to draw ------------------------------------------------------------------------------


def adapter_families(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Per adapter name, the families its installed manifests list (every version), sorted."""
    found: dict[str, set[str]] = {}
    for manifest in registry.manifests():
        found.setdefault(manifest.name, set()).update(manifest.families)
    return {name: tuple(sorted(families)) for name, families in sorted(found.items())}


def applied_releases(registry: Registry, name: str, releases: Iterable[str]) -> tuple[str, ...]:
    """The releases among ``releases`` at which ``prepare`` applies adapter ``name``."""
    from spyre_adapters.lifecycle import Lifecycle

    lifecycle = Lifecycle(registry)
    return tuple(
        release
        for release in releases
        if any(row.name == name and row.applied for row in lifecycle.status_at(release))
    )


# -- campaigns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """A case run at every release of a campaign; ``built`` is false (with the ``reason``) when
    the drawn configuration is not a run (see :func:`build_case`)."""

    case: Case
    built: bool
    reason: str = ""
    runs: tuple[CaseRun, ...] = ()
    seconds: float = 0.0


def case_worker(case: Mapping[str, Any], releases: Sequence[str]) -> dict[str, Any]:
    """The work of one isolated campaign worker: build the case (JSON, see
    :meth:`Case.to_json`) once and run it at each release; JSON results."""
    import torch
    import transformers

    torch.set_num_threads(1)  # workers run side by side: one core each
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    drawn = Case.from_json(case)
    try:
        built = build_case(drawn)
    except FamilyBuildError as exc:
        return {"built": False, "reason": str(exc)}
    return {"built": True, "runs": [run_case(drawn, built, r).to_json() for r in releases]}


def _isolated(
    case: Case, releases: Sequence[str], timeout: float, workers: WorkerPool
) -> CaseResult:
    outcome = workers.run(
        case_worker, (case.to_json(), list(releases)), timeout * max(len(releases), 1)
    )
    if outcome.status == "ok":
        value = outcome.value
        if not value["built"]:
            return CaseResult(case, False, value["reason"], seconds=outcome.seconds)
        runs = tuple(CaseRun.from_json(r) for r in value["runs"])
        return CaseResult(case, True, runs=runs, seconds=outcome.seconds)
    lines = outcome.error.strip().splitlines()
    detail = f"worker {outcome.status}: {lines[-1] if lines else outcome.status}"
    runs = tuple(CaseRun(case, r, Outcome.ERROR, detail) for r in releases)
    return CaseResult(case, True, runs=runs, seconds=outcome.seconds)


def campaign(
    cases: Sequence[Case],
    releases: Sequence[str],
    *,
    jobs: int = 1,
    timeout: float = 120.0,
) -> Iterator[CaseResult]:
    """Run every case at every release, each case in an isolated worker process (a crash or
    a hang, after ``timeout`` seconds per release, becomes ``error`` runs), ``jobs`` workers at
    a time; results arrive as cases finish."""
    with WorkerPool(jobs) as workers, ThreadPoolExecutor(max_workers=max(1, jobs)) as waiting:
        futures = [
            waiting.submit(_isolated, case, list(releases), timeout, workers) for case in cases
        ]
        for future in futures:
            yield future.result()
