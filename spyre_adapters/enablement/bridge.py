"""The bridge loop: find, validate and keep a form the release runs for every op that stops a family.

``spyre-adapters bridge FAMILY --stack R`` calls :func:`bridge_family`. Starting from the
adapters the lifecycle resolves at R (the hand-written ones and the generated op bridges
already installed), it runs the family on the emulated device at R, and for each op that
stops it inside the model scope:

1. captures the op's real arguments (a dispatch mode below the model records the call that
   raised);
2. tries the op's candidate forms in order
   (:func:`~spyre_adapters.enablement._bridge_candidates.available`: PyTorch's decomposition
   table, the core ATen decompositions, ``torch._refs``, a hand-written rewrite into native
   ops, then the host, and last the host in float32 on contiguous copies),
   validating each on the device at R against the CPU on the captured arguments and on
   variants of other values, layouts, shapes and dtypes
   (:mod:`spyre_adapters.enablement.op_validation`), and keeps the first that holds;
3. runs again with every op kept so far bridged (an :class:`~spyre_adapters.library.op_bridge_v3.
   OpBridge`), until the family runs; then compares it with the CPU (the triage criteria).

What no candidate can bridge is listed with the reason (:class:`Unbridged`): a layout rule (the
padding adapters' business, not an op's form), an op outside the model scope, an error that is
not a lowering error, or an op for which every candidate failed (each candidate's failure
given). The run then steps past it as triage does (the op runs on the host, or the layout rule
is off, at a derived release) to find what else stops the family, so one call lists
everything.

Installed generated bridges the family reaches are re-validated on the family's own arguments
(``reused``), so a bridge made for one family is verified for each family it serves.

:func:`write_builtin` and :func:`write_package` turn the bridged ops into generated adapters
(:mod:`spyre_adapters.enablement.generation`): one adapter per op, named ``bridge-<op>``.

The results are in :mod:`spyre_adapters.enablement._bridge_results`, the work on one op's
candidates in :mod:`spyre_adapters.enablement._bridge_candidates`; this module runs the loop
and re-exports their public names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch._ops import OpOverload

from spyre_adapters.agreement import facts
from spyre_adapters.enablement._bridge_candidates import (
    Capture,
    choose_candidate,
    installed_bridges,
    refuses,
)
from spyre_adapters.enablement._bridge_results import BridgedOp, BridgeResult, Unbridged
from spyre_adapters.enablement.device_runs import run_on_device, step_past
from spyre_adapters.enablement.op_samples import Sample, sample_of
from spyre_adapters.enablement.op_validation import validate
from spyre_adapters.enablement.results import DeviceRun, RunError
from spyre_adapters.library.op_bridge import observe, op_name, resolve_op
from spyre_adapters.library.op_bridge_v3 import OpBridge

if TYPE_CHECKING:
    from spyre_adapters.enablement.families import BuiltFamily
    from spyre_adapters.registry import Registry
    from spyre_sim.catalogue import Release

__all__ = [
    "MAX_ROUNDS",
    "BridgeResult",
    "BridgedOp",
    "Unbridged",
    "bridge_family",
    "bridge_worker",
    "choose_candidate",
    "installed_bridges",
    "load_samples",
    "refuses",
    "without_generated",
]

#: At most this many ops are bridged or stepped past in one call.
MAX_ROUNDS = 24


def _written(op: OpOverload) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)


# -- the loop ----------------------------------------------------------------------------------


def bridge_family(
    built: BuiltFamily,
    release: str | Release,
    *,
    registry: Registry | None = None,
    layout_checks: bool = True,
    max_rounds: int = MAX_ROUNDS,
) -> BridgeResult:
    """Run the bridge loop (see the module docstring) for an already built family."""
    import spyre_sim
    from spyre_adapters import default_registry

    start = time.perf_counter()
    registry = default_registry() if registry is None else registry
    target = spyre_sim.resolve_stack(release)
    installed = installed_bridges(registry, target)
    table: dict[str, str] = {}
    bridged: list[BridgedOp] = []
    unbridged: list[Unbridged] = []
    current = target
    run: DeviceRun | None = None
    observed: dict[str, Sample] = {}
    rounds = 0
    family = built.model_type

    def observer(func: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        name = op_name(func)
        if name in installed and name not in table and name not in observed:
            observed[name] = sample_of(args, kwargs, f"captured in {family}")

    for rounds in range(1, max_rounds + 1):  # noqa: B007  (the count is reported)
        capture = Capture(family)
        extra = [("op bridges under validation", OpBridge(table))] if table else []
        run = run_on_device(
            built,
            current,
            adapters=True,
            registry=registry,
            layout_checks=layout_checks,
            list_all_gaps=False,
            extra=extra,
            modes=[observe(observer), capture],
        )
        if run.ran or run.error is None:
            break
        error = run.error
        stop = _handle(error, capture, table, target, layout_checks, bridged, unbridged)
        if stop:
            break
        if unbridged and unbridged[-1].op == error.op and unbridged[-1].gap == error.gap:
            current = step_past(current, error, error.type == "SpyreLayoutError")
    reused = _reverify(installed, observed, target, layout_checks)
    result = BridgeResult(
        family=family,
        release=target.name,
        preset=built.preset.name,
        outcome="",
        detail="",
        bridged=reused + bridged,
        unbridged=unbridged,
        run=run,
        rounds=rounds,
    )
    result.outcome, result.detail = _outcome(result, run, current is target)
    if result.outcome == "mismatch":
        unjudged = built.not_judged(result.detail)
        if unjudged is not None:
            result.outcome, result.detail = "not-judged", unjudged
    result.seconds = time.perf_counter() - start
    return result


def _handle(
    error: RunError,
    capture: Capture,
    table: dict[str, str],
    target: Release,
    layout_checks: bool,
    bridged: list[BridgedOp],
    unbridged: list[Unbridged],
) -> bool:
    """Deal with the error that stopped a round: bridge its op (True: stop the loop)."""
    if error.kind != "lowering" or error.gap is None:
        unbridged.append(
            Unbridged(None, None, error.module_path, "device-error", error.message.splitlines()[0])
        )
        return True
    if error.type == "SpyreLayoutError":
        unbridged.append(
            Unbridged(
                error.gap,
                error.op,
                error.module_path,
                "layout",
                f"a layout rule of the device (gap `{error.gap}`), which the form of a single "
                "op does not change: an adapter that changes the model's layout (padding, "
                "split projections) must bridge it",
            )
        )
        return False
    op = error.op or ""
    captured = capture.failed.get(op)
    if captured is None:
        unbridged.append(
            Unbridged(
                error.gap,
                error.op,
                error.module_path,
                "not-an-op-call",
                f"{op} stopped the run outside an op call (moving a tensor): "
                f"{error.message.splitlines()[0]}",
            )
        )
        return False
    sample, in_scope = captured
    if not in_scope:
        unbridged.append(
            Unbridged(
                error.gap,
                op,
                error.module_path,
                "outside-model-scope",
                "the op runs in the harness, not in the model: nothing the stack compiles",
            )
        )
        return False
    if op in table:  # the kept candidate raised on a call it was not checked on
        unbridged.append(
            Unbridged(
                error.gap,
                op,
                error.module_path,
                "no-candidate",
                f"the {table[op]} candidate kept for {op} raises on another call "
                f"({sample.signature}): {error.message.splitlines()[0]}",
            )
        )
        return True
    try:
        overload = resolve_op(op)
    except ValueError as exc:
        unbridged.append(Unbridged(error.gap, op, error.module_path, "no-candidate", str(exc)))
        return False
    if any(r.alias_info is not None for r in overload._schema.returns) and not _written(overload):
        unbridged.append(
            Unbridged(
                error.gap,
                op,
                error.module_path,
                "view",
                f"{op} returns a view of its input: computed in another form it would be a "
                "copy, and writes through the view would be lost",
            )
        )
        return False
    verdicts = choose_candidate(overload, [sample], target, layout_checks=layout_checks)
    if verdicts and verdicts[-1].holds:
        table[op] = verdicts[-1].candidate
        bridged.append(
            BridgedOp(
                op,
                error.gap,
                error.module_path,
                verdicts[-1].candidate,
                tuple(verdicts),
                (f"{sample.signature} ({sample.label})",),
                captured=(sample,),
            )
        )
        return False
    tried = "; ".join(f"{v.candidate}: {v.reason}" for v in verdicts)
    unbridged.append(
        Unbridged(
            error.gap,
            op,
            error.module_path,
            "no-candidate",
            f"no candidate holds at {target.name} ({tried})",
            tuple(verdicts),
        )
    )
    return False


def _reverify(
    installed: Mapping[str, tuple[str, str]],
    observed: Mapping[str, Sample],
    target: Release,
    layout_checks: bool,
) -> list[BridgedOp]:
    reused = []
    for op, sample in sorted(observed.items()):
        name, kind = installed[op]
        verdict = validate(resolve_op(op), kind, [sample], target, layout_checks=layout_checks)
        module = sample.label.partition("(")[2].rstrip(")") or None
        reused.append(
            BridgedOp(
                op,
                "",
                module,
                kind,
                (verdict,),
                (f"{sample.signature} ({sample.label})",),
                adapter=name,
                captured=(sample,),
            )
        )
    return reused


def _outcome(result: BridgeResult, run: DeviceRun | None, at_target: bool) -> tuple[str, str]:
    failed = [b for b in result.bridged if b.adapter is not None and not b.holds]
    if failed:
        names = ", ".join(f"{b.adapter} ({b.op}: {b.verdicts[-1].reason})" for b in failed)
        return "reuse-failed", f"installed bridges do not hold on this family: {names}"
    if result.unbridged:
        listed = "; ".join(
            f"{u.op or u.gap} in {u.module_path or 'the model'}: {u.why}" for u in result.unbridged
        )
        return "unbridged", f"no candidate could bridge: {listed}"
    if run is None or not run.ran or not at_target:
        return "unbridged", "the loop ended before the family ran"
    comparison = run.comparison
    if comparison is None or not comparison.matches:
        return (
            "mismatch",
            f"runs at {result.release} but does not match the CPU ({facts(comparison)})",
        )
    new = result.table
    if not new:
        return "runs", f"runs and matches the CPU at {result.release} with the installed adapters"
    ops = ", ".join(f"{op} ({kind})" for op, kind in new.items())
    return (
        "bridged",
        f"runs and matches the CPU at {result.release} (cosine {comparison.cosine:.5f}) "
        f"with {ops} bridged",
    )


# -- many families -----------------------------------------------------------------------------


def without_generated(registry: Registry) -> Registry:
    """``registry`` without its generated adapters (every op a family reaches is met anew)."""
    from spyre_adapters.registry import Registry as RegistryClass

    reduced = RegistryClass(registry.catalogue)
    reduced.add_all(
        (m for m in registry.manifests() if not m.generated), source="bridge: hand-written only"
    )
    return reduced


def bridge_worker(
    family: str,
    releases: list[str],
    preset: str,
    layout_checks: bool,
    fresh: bool,
    testers: str | None = None,
) -> list[tuple[dict[str, Any], bytes]]:
    """The work of one isolated worker: build ``family`` (from its model tester in the
    Transformers test tree ``testers`` when one is given, at preset ``tester`` or
    ``tester-scaled``) and run :func:`bridge_family` at each release (``fresh``: without the
    installed generated adapters). Returns, per release, the
    result as JSON and the captured samples of each op bridged here, ``{op: [Sample]}``
    serialised with ``torch.save`` (read them with :func:`load_samples`: tensors sent between
    processes otherwise need the sending process alive)."""
    import torch
    import transformers

    from spyre_adapters import default_registry
    from spyre_adapters.enablement.families import build_family
    from spyre_adapters.enablement.size_presets import FamilyBuildError
    from spyre_adapters.enablement.sweep import preset_named

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    registry = default_registry()
    if fresh:
        registry = without_generated(registry)
    try:
        if testers is not None:
            from spyre_adapters.enablement.testers import build_from_tester

            built = build_from_tester(family, Path(testers), scaled=preset != "tester")
        else:
            built = build_family(family, preset=preset_named(preset))
    except FamilyBuildError as exc:
        return [
            (
                BridgeResult(family, r, preset, "build-failed", str(exc)).to_json(),
                _dump({}),
            )
            for r in releases
        ]
    out = []
    for release in releases:
        result = bridge_family(built, release, registry=registry, layout_checks=layout_checks)
        samples = {b.op: list(b.captured) for b in result.bridged if b.adapter is None}
        out.append((result.to_json(), _dump(samples)))
    return out


def _dump(samples: dict[str, list[Sample]]) -> bytes:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(samples, buffer)
    return buffer.getvalue()


def load_samples(data: bytes) -> dict[str, list[Sample]]:
    """The samples :func:`bridge_worker` returns, read back."""
    import io

    import torch

    loaded: dict[str, list[Sample]] = torch.load(io.BytesIO(data), weights_only=False)
    return loaded
