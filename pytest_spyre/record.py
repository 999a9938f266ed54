"""What the plugin records per test, and the run-wide tallies derived from those records.

A :class:`TestRecord` is plain data (JSON round-trippable through :meth:`TestRecord.to_json` and
:meth:`TestRecord.from_json`), so records travel from ``pytest-xdist`` workers to the
controller unchanged, and a serial run and a distributed run tally the same numbers.
Torch-free on purpose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FAILURE_CLASSES",
    "Agreement",
    "Blocker",
    "Failure",
    "RunTally",
    "TestRecord",
    "counted",
    "tally",
]

#: The classes a failing test can be in (see :mod:`pytest_spyre.classify`), in report order.
FAILURE_CLASSES = (
    "gap", "precision", "miscompile", "adapter", "emulator", "platform", "unexplained"
)  # fmt: skip


def counted(counts: Mapping[str, int]) -> str:
    """``{"b": 2, "a": 1}`` as ``"a x1, b x2"`` (by name), as the spyre sections say counts."""
    return ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))


@dataclass
class Blocker:
    """The device error that stopped a test: the gap and where it happened."""

    gap: str
    op: str
    release: str
    module_path: str | None
    closes_in: str | None
    lasting: bool
    message: str
    bridged_by: list[str] = field(default_factory=list)  # "name version" of registered adapters
    runs_from: str | None = None  # first release where the op runs at all (a fallback counts)

    def describe(self) -> str:
        where = f" in {self.module_path}" if self.module_path else ""
        closes = (
            f"closed in {self.closes_in}"
            if self.closes_in
            else ("lasting" if self.lasting else "not closed by any known release")
        )
        if self.runs_from and self.runs_from != self.closes_in:
            closes = f"runs (cpu-fallback) from {self.runs_from}, {closes}"
        bridge = (
            f"; bridged by adapter {', '.join(self.bridged_by)}"
            if self.bridged_by
            else "; no registered adapter bridges it"
        )
        return f"gap `{self.gap}` ({self.op}{where}) at stack {self.release}, {closes}{bridge}"


@dataclass
class Failure:
    """Why a test failed on the device, in one of :data:`FAILURE_CLASSES`.

    ``detail``: one line for people. ``gap``: the gap of a ``gap`` or ``miscompile`` failure.
    ``adapter``: "name version" of the adapter of an ``adapter`` failure. ``measured``: for a
    ``precision`` failure, the failed closeness check (max abs/rel difference, tolerances,
    device format)."""

    cls: str
    detail: str
    gap: str | None = None
    adapter: str | None = None
    measured: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"class": self.cls, "detail": self.detail}
        for key in ("gap", "adapter", "measured"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Failure:
        return cls(data["class"], data["detail"], data.get("gap"), data.get("adapter"),
                   data.get("measured"))  # fmt: skip


@dataclass
class Agreement:
    """Numeric agreement of one top-level model forward on the device with its CPU copy."""

    model: str
    cosine: float
    max_abs_diff: float
    top1: float | None  # fraction of positions whose argmax agrees; None without logits

    def worse_than(self, other: Agreement) -> bool:
        return (self.cosine, -self.max_abs_diff) < (other.cosine, -other.max_abs_diff)


@dataclass
class TestRecord:
    """Everything the plugin learnt about one test (setup + call + teardown)."""

    __test__ = False  # not a test class, whatever module imports it

    nodeid: str
    outcome: str = "passed"  # passed|failed|skipped|xfailed|xpassed|error
    on_device: bool = True
    gaps: dict[str, int] = field(default_factory=dict)  # gap id -> times hit
    gap_modules: dict[str, list[str]] = field(default_factory=dict)
    fallbacks: dict[str, int] = field(default_factory=dict)  # op -> count
    miscompiles: dict[str, int] = field(default_factory=dict)  # gap id -> count
    # results the emulator could not compute as the device does (kind -> count: "fp16-holder")
    emulator_limits: dict[str, int] = field(default_factory=dict)
    # rows of selections (top-k, argmax) the device decided between values within one DL16
    # step, op -> rows (see spyre_sim._selection_ties): the CPU may have chosen otherwise
    rounding_ties: dict[str, int] = field(default_factory=dict)
    # results that held NaN their operands did not, op -> count (spyre_sim._nan_made): 0/0
    # once DL16, without subnormals, stored tiny numbers as zero
    nan_made: dict[str, int] = field(default_factory=dict)
    nan_modules: dict[str, list[str]] = field(default_factory=dict)  # op -> module paths
    adapters: list[str] = field(default_factory=list)  # "name version", applied in this test
    bridged: dict[str, int] = field(default_factory=dict)  # op -> calls an op bridge computed
    blocked_by: Blocker | None = None
    compare: list[Agreement] = field(default_factory=list)
    inference_only: bool = False
    xfail_gap: str | None = None
    gap_closed: bool = False
    failure: Failure | None = None  # why it failed on the device (None: it did not)
    harness_ops: int = 0  # ops of the test's own code on device tensors (host semantics)
    subtests_failed: int = 0
    adapter_errors: list[str] = field(default_factory=list)  # adapters that failed to prepare
    expectation: str | None = None  # the expectations-file verdict: expected / unexpected ...

    def worst_agreement(self) -> Agreement | None:
        worst: Agreement | None = None
        for agreement in self.compare:
            if worst is None or agreement.worse_than(worst):
                worst = agreement
        return worst

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "on_device": self.on_device,
            "gaps": dict(sorted(self.gaps.items())),
            "gap_modules": {k: sorted(v) for k, v in sorted(self.gap_modules.items())},
            "fallbacks": dict(sorted(self.fallbacks.items())),
            "miscompiles": dict(sorted(self.miscompiles.items())),
            "emulator_limits": dict(sorted(self.emulator_limits.items())),
            "rounding_ties": dict(sorted(self.rounding_ties.items())),
            "nan_made": dict(sorted(self.nan_made.items())),
            "nan_modules": {k: sorted(v) for k, v in sorted(self.nan_modules.items())},
            "adapters": sorted(self.adapters),
            "bridged": dict(sorted(self.bridged.items())),
            "blocked_by": None if self.blocked_by is None else vars(self.blocked_by).copy(),
            "compare": [vars(a).copy() for a in self.compare],
            "inference_only": self.inference_only,
            "xfail_gap": self.xfail_gap,
            "gap_closed": self.gap_closed,
            "failure": None if self.failure is None else self.failure.to_json(),
            "harness_ops": self.harness_ops,
            "subtests_failed": self.subtests_failed,
            "adapter_errors": list(self.adapter_errors),
            "expectation": self.expectation,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestRecord:
        blocked = data.get("blocked_by")
        return cls(
            nodeid=data["nodeid"],
            outcome=data["outcome"],
            on_device=data["on_device"],
            gaps=dict(data["gaps"]),
            gap_modules={k: list(v) for k, v in data["gap_modules"].items()},
            fallbacks=dict(data["fallbacks"]),
            miscompiles=dict(data["miscompiles"]),
            emulator_limits=dict(data.get("emulator_limits", {})),
            rounding_ties=dict(data.get("rounding_ties", {})),
            nan_made=dict(data.get("nan_made", {})),
            nan_modules={k: list(v) for k, v in data.get("nan_modules", {}).items()},
            adapters=list(data["adapters"]),
            bridged=dict(data.get("bridged", {})),
            blocked_by=None if blocked is None else Blocker(**blocked),
            compare=[Agreement(**a) for a in data["compare"]],
            inference_only=data["inference_only"],
            xfail_gap=data["xfail_gap"],
            gap_closed=data["gap_closed"],
            failure=None if data.get("failure") is None else Failure.from_json(data["failure"]),
            harness_ops=int(data.get("harness_ops", 0)),
            subtests_failed=int(data.get("subtests_failed", 0)),
            adapter_errors=list(data.get("adapter_errors", [])),
            expectation=data.get("expectation"),
        )

    def properties(self) -> list[tuple[str, str]]:
        """JUnit ``record_property`` entries carrying the same data as the JSON record."""
        props = [
            ("spyre_on_device", str(self.on_device).lower()),
            ("spyre_gaps", ",".join(sorted(self.gaps))),
            ("spyre_fallbacks", ",".join(f"{k}={v}" for k, v in sorted(self.fallbacks.items()))),
            ("spyre_miscompiles", ",".join(sorted(self.miscompiles))),
            ("spyre_adapters", ",".join(sorted(self.adapters))),
        ]
        if self.blocked_by is not None:
            props.append(("spyre_blocked_by", self.blocked_by.describe()))
        worst = self.worst_agreement()
        if worst is not None:
            props.append(
                (
                    "spyre_agreement",
                    f"cosine={worst.cosine:.6f} max_abs_diff={worst.max_abs_diff:.3g}"
                    + ("" if worst.top1 is None else f" top1={worst.top1:.3f}"),
                )
            )
        if self.xfail_gap is not None:
            props.append(("spyre_xfail_gap", self.xfail_gap))
        if self.failure is not None:
            props.append(("spyre_failure", f"{self.failure.cls}: {self.failure.detail}"))
        return props


@dataclass
class RunTally:
    """Run-wide counts for the terminal summary and the JSON report."""

    outcomes: Counter[str]
    tests: int
    on_device: int
    gaps_hit: Counter[str]  # gap -> number of tests that hit it
    blocked: Counter[str]  # gap -> number of tests it stopped
    fallbacks: Counter[str]  # op -> total count
    fallback_tests: Counter[str]  # op -> tests
    miscompiles: Counter[str]  # gap -> tests
    adapters: Counter[str]  # "name version" -> tests
    inference_only: int
    gap_closed: list[str]
    worst: tuple[str, Agreement] | None
    failures: Counter[str] = field(default_factory=Counter)  # failure class -> tests
    harness_ops: int = 0
    adapter_errors: Counter[str] = field(default_factory=Counter)  # "adapter: stage" -> tests
    expectations: Counter[str] = field(default_factory=Counter)  # verdict -> tests
    emulator_limits: Counter[str] = field(default_factory=Counter)  # kind -> tests
    rounding_ties: Counter[str] = field(default_factory=Counter)  # op -> tests
    nan_made: Counter[str] = field(default_factory=Counter)  # op -> tests

    def to_json(self) -> dict[str, Any]:
        return {
            "tests": self.tests,
            "on_device": self.on_device,
            "outcomes": dict(sorted(self.outcomes.items())),
            "gaps_hit": dict(sorted(self.gaps_hit.items())),
            "blocked": dict(sorted(self.blocked.items())),
            "fallbacks": dict(sorted(self.fallbacks.items())),
            "miscompiles": dict(sorted(self.miscompiles.items())),
            "adapters_applied": dict(sorted(self.adapters.items())),
            "inference_only": self.inference_only,
            "gap_closed": sorted(self.gap_closed),
            "worst_agreement": None
            if self.worst is None
            else {"nodeid": self.worst[0], **vars(self.worst[1])},
            "failures": {c: self.failures[c] for c in FAILURE_CLASSES if self.failures[c]},
            "harness_ops": self.harness_ops,
            "adapter_errors": dict(sorted(self.adapter_errors.items())),
            "expectations": dict(sorted(self.expectations.items())),
            "emulator_limits": dict(sorted(self.emulator_limits.items())),
            "rounding_ties": dict(sorted(self.rounding_ties.items())),
            "nan_made": dict(sorted(self.nan_made.items())),
        }


def tally(records: Iterable[TestRecord]) -> RunTally:
    """Add up per-test records (order-independent, so serial and ``-n`` runs agree)."""
    result = RunTally(Counter(), 0, 0, Counter(), Counter(), Counter(), Counter(), Counter(),
                      Counter(), 0, [], None)  # fmt: skip
    for rec in sorted(records, key=lambda r: r.nodeid):
        result.tests += 1
        result.outcomes[rec.outcome] += 1
        if rec.subtests_failed:
            result.outcomes["subtests failed"] += rec.subtests_failed
        if rec.failure is not None and rec.outcome in ("failed", "error"):
            result.failures[rec.failure.cls] += 1
        result.harness_ops += rec.harness_ops
        result.adapter_errors.update(set(rec.adapter_errors))
        if rec.expectation is not None:
            result.expectations[rec.expectation] += 1
        result.on_device += rec.on_device
        result.gaps_hit.update(set(rec.gaps) | set(rec.miscompiles))
        if rec.blocked_by is not None:
            result.blocked[rec.blocked_by.gap] += 1
        result.fallbacks.update(rec.fallbacks)
        result.fallback_tests.update(set(rec.fallbacks))
        result.miscompiles.update(set(rec.miscompiles))
        result.emulator_limits.update(set(rec.emulator_limits))
        result.rounding_ties.update(set(rec.rounding_ties))
        result.nan_made.update(set(rec.nan_made))
        result.adapters.update(set(rec.adapters))
        result.inference_only += rec.inference_only
        if rec.gap_closed:
            result.gap_closed.append(rec.nodeid)
        worst = rec.worst_agreement()
        if worst is not None and (result.worst is None or worst.worse_than(result.worst[1])):
            result.worst = (rec.nodeid, worst)
    return result
