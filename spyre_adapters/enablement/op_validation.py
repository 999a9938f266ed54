"""Is a bridge candidate for one ATen op exact at a release? Checked on the device, against the CPU.

:func:`validate` runs a candidate form of an op (see :mod:`spyre_adapters.library.op_bridge`)
on the emulated device at a release, inside the model scope (so every op it issues is judged
by the release, layout rules included), on a list of :class:`Sample` arguments, and compares
each result with the CPU kernel of the op on the same values:

- the **captured** samples: the arguments a model really passed to the op (recorded by
  ``spyre-adapters bridge`` when the op stopped the model);
- **variants** of the first one (:func:`~spyre_adapters.enablement.op_samples.variants`): the
  same shapes with fresh random values, with special values (zeros, signed zeros, the extremes
  of the range, infinities, NaN, ties), with the dims stored in reverse order in memory (the
  strides a device view hands a host kernel), every size above one doubled, every such size
  plus one, for a call with a scalar argument that sets a size (``bins``, ``minlength``, ``k``, a kernel
  size) every integer of the call moved up by 60
  (:func:`~spyre_adapters.enablement.op_samples.shifted_sizes`: a tester's 4 experts become a
  real model's 64), another dtype (bfloat16 for
  half-precision inputs where the release stores it, int64 for int32 inputs), and, for a call
  of several tensors, each 1-D one left empty (a table with no entries).

The reference is the CPU kernel on the values **as the device holds them** (each sample moved
to the device and back, so DL16 rounding and saturation are the same on both sides), in
contiguous copies (a kernel that is wrong for some strides, as PyTorch's fp16 CPU
``grid_sampler_2d`` is, must not be its own reference), through
:func:`~spyre_adapters.library.op_bridge.cpu_call`. A check ``holds`` when every output (and
every input the op writes in place) agrees: integer and bool results exactly, floating-point
results within ``atol = rtol =`` :data:`TOLERANCE` (the per-op bar of the real stack's tests
in fp16) after the reference is stored as the device stores it (DL16) -- the kernel at the
inputs' half precision, or the same kernel in float32 on the same values (what the stock model
computes on the CPU; PyTorch's fp16 ``grid_sampler_2d`` is 0.04 from it on unit values), so a
candidate that computes more precisely than the half kernel is not rejected for it --, NaN
matching NaN or -inf (a NaN entering the device reads back as -inf: gap ``nan-entry``, at every release, so a
result moved back from the host meets it). A result that is only its backward's workspace
(:data:`WORKSPACE_RESULTS`) is not compared: inference never reads it.

A check ``raises`` when the candidate raises at the release (a lowering error names the op
and gap) and is a ``mismatch`` when a result differs; either rejects the candidate. A variant
is ``skipped`` (and does not count) when the CPU kernel itself refuses it, or when the device
cannot hold its inputs or lays them out against a layout rule at that release (bfloat16 before
it is stored, a size made misaligned by the ``+ 1`` variant): a model meeting such shapes
meets the layout rule whatever the op's form. On the captured samples nothing is skipped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_flatten, tree_map

from spyre_adapters.enablement.op_samples import Sample, to_cpu
from spyre_adapters.library import _pow_rewrites  # noqa: F401  (registers its rewrites)
from spyre_adapters.library.op_bridge import cpu_call
from spyre_adapters.library.op_bridge_v3 import candidate

if TYPE_CHECKING:
    from spyre_sim.catalogue import Release

__all__ = ["TOLERANCE", "WORKSPACE_RESULTS", "Check", "Verdict", "validate"]

#: atol and rtol of a floating-point comparison (SPYRE.md section 7: per-op tests in fp16).
TOLERANCE = 5e-3
#: Gaps of what the device can store or lay out: a variant meeting them is skipped.
_STORAGE_GAPS = frozenset({"bf16", "bool-storage", "zero-length", "fp32-storage", "rank-4d"})


@dataclass(frozen=True)
class Check:
    """One sample run with one candidate. ``outcome``: ``holds``, ``mismatch``, ``raises`` or
    ``skipped``; ``detail`` says what differed, what raised, or why it was skipped."""

    label: str
    signature: str
    outcome: str
    detail: str = ""

    @property
    def counts(self) -> bool:
        return self.outcome != "skipped"

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "signature": self.signature,
            "outcome": self.outcome,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Verdict:
    """A candidate for an op at a release: whether it holds, and every check made."""

    op: str
    candidate: str
    release: str
    checks: tuple[Check, ...]

    @property
    def holds(self) -> bool:
        """Every check that counts holds, and at least one counts."""
        counted = [c for c in self.checks if c.counts]
        return bool(counted) and all(c.outcome == "holds" for c in counted)

    @property
    def reason(self) -> str:
        """The first failure in words (empty when it holds)."""
        for check in self.checks:
            if check.counts and check.outcome != "holds":
                return f"{check.outcome} on {check.label} ({check.signature}): {check.detail}"
        if not any(c.counts for c in self.checks):
            return "no sample could be run at this release"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "candidate": self.candidate,
            "release": self.release,
            "holds": self.holds,
            "reason": self.reason,
            "checks": [c.to_json() for c in self.checks],
        }


# -- comparison --------------------------------------------------------------------------------


def _stored_like_device(value: torch.Tensor) -> torch.Tensor:
    from spyre_sim.numerics import round_to_dl16, round_wide_to_dl16

    if value.dtype is torch.float16:
        return round_to_dl16(value)
    if value.dtype in (torch.float32, torch.float64):
        # the device stores fp32 as DL16, rounded once from the wide value as its transfers
        # do (through fp16 first, a quarter of all values would round twice)
        return round_wide_to_dl16(value)
    return value


#: Results of an op that only its backward reads, by op packet: their positions. ``_ctc_loss``
#: returns ``(neg_log_likelihood, log_alpha)``; ``torch.nn.functional.ctc_loss`` gives only the
#: first, and the CPU kernel allocates the alignment table ``log_alpha`` uninitialised and sets
#: only the cells each sequence's lengths reach, so the rest is whatever memory held.
WORKSPACE_RESULTS: dict[str, frozenset[int]] = {"aten._ctc_loss": frozenset({1})}


def _differ(expected: Any, got: Any, skip: frozenset[int] = frozenset()) -> str | None:
    """Why ``got`` (device result, on the CPU) differs from ``expected``, or ``None``; the
    results at positions ``skip`` are not compared (:data:`WORKSPACE_RESULTS`)."""
    want, _ = tree_flatten(expected)
    have, _ = tree_flatten(got)
    if len(want) != len(have):
        return f"{len(have)} results where the CPU gives {len(want)}"
    for index, (a, b) in enumerate(zip(want, have, strict=True)):
        if index in skip:
            continue
        where = f"result {index}" if len(want) > 1 else "the result"
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return f"{where} is a {type(b).__name__} where the CPU gives a {type(a).__name__}"
        if not isinstance(a, torch.Tensor):
            if a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b)):
                return f"{where} is {b!r} where the CPU gives {a!r}"
            continue
        if tuple(a.shape) != tuple(b.shape):
            return f"{where} has shape {list(b.shape)} where the CPU gives {list(a.shape)}"
        if a.is_floating_point() != b.is_floating_point() or (a.dtype is torch.bool) != (
            b.dtype is torch.bool
        ):
            return f"{where} is {b.dtype} where the CPU gives {a.dtype}"
        if not a.is_floating_point():
            if not torch.equal(a.to(torch.int64), b.to(torch.int64)):
                wrong = int((a.to(torch.int64) != b.to(torch.int64)).sum())
                return f"{where}: {wrong} of {a.numel()} values differ (exact match required)"
            continue
        ref = _stored_like_device(a).float()
        out = b.float()
        close = torch.isclose(out, ref, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True)
        # a NaN that enters the device reads back as -inf (gap `nan-entry`, every release): a
        # result the host computes and moves back meets it, as the stack's own fallbacks do
        close |= torch.isnan(ref) & (out == -math.inf)
        if not bool(close.all()):
            bad = ~close
            diff = (out - ref).abs()[bad & torch.isfinite(out) & torch.isfinite(ref)]
            worst = f"; max abs difference {float(diff.max()):.3g}" if diff.numel() else ""
            return (
                f"{where}: {int(bad.sum())} of {a.numel()} values outside atol = rtol = "
                f"{TOLERANCE}{worst}"
            )
    return None


# -- running a candidate -----------------------------------------------------------------------


def _written(op: OpOverload) -> list[int]:
    return [
        i
        for i, argument in enumerate(op._schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    ]


def _check(
    op: OpOverload,
    impl: Callable[[OpOverload, Sequence[Any], Mapping[str, Any]], Any],
    sample: Sample,
    release: Release,
    layout_checks: bool,
) -> Check:
    import spyre_sim
    from spyre_sim.errors import SpyreLayoutError, SpyreLoweringError

    def make(outcome: str, detail: str = "") -> Check:
        return Check(sample.label, sample.signature, outcome, detail)

    def to_device(value: Any) -> Any:
        return value.to("spyre") if isinstance(value, torch.Tensor) else value

    with ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        stack.enter_context(spyre_sim.use_stack(release))
        # the samples are moved like a harness moves inputs; the candidate runs as model code
        stack.enter_context(spyre_sim.configure(layout_checks=layout_checks, judge_harness=False))
        try:
            device_args, device_kwargs = tree_map(
                to_device, (list(sample.args), dict(sample.kwargs))
            )
            held_args, held_kwargs = tree_map(to_cpu, (device_args, device_kwargs))
        except Exception as error:
            return make("skipped", f"the device cannot hold these inputs: {_short(error)}")
        reference_args, reference_kwargs = tree_map(_dense, (held_args, held_kwargs))
        try:
            expected = cpu_call(op, reference_args, reference_kwargs)
        except Exception as error:
            if sample.captured:
                return make("raises", f"the CPU kernel refuses the captured call: {_short(error)}")
            return make("skipped", f"the CPU kernel refuses it: {_short(error)}")
        try:
            with spyre_sim.model_scope():
                got = impl(op, device_args, device_kwargs)
            got_cpu = tree_map(to_cpu, got)
            written_cpu = [to_cpu(device_args[i]) for i in _written(op) if i < len(device_args)]
        except SpyreLoweringError as error:
            storage = error.gap in _STORAGE_GAPS or isinstance(error, SpyreLayoutError)
            text = f"{error.op} does not lower at {release.name} (gap `{error.gap}`)"
            if storage and not sample.captured:
                return make("skipped", f"layout or storage rule: {text}")
            return make("raises", text)
        except Exception as error:
            return make("raises", _short(error))
    written_expected = [reference_args[i] for i in _written(op) if i < len(reference_args)]
    packet = "aten." + op._overloadpacket.__name__
    skip = WORKSPACE_RESULTS.get(packet, frozenset())
    why = _differ(expected, got_cpu, skip)
    if why is not None and not written_expected:
        wide = _float32_reference(op, reference_args, reference_kwargs)
        if wide is not None and _differ(wide, got_cpu, skip) is None:
            why = None  # the stock model's float32 answer, rounded once: the better reference
    if why is None and written_expected:
        why = _differ(written_expected, written_cpu)
        why = None if why is None else f"an input written in place differs: {why}"
    return make("holds") if why is None else make("mismatch", why)


def _float32_reference(op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """The CPU kernel on float32 copies of the half-precision tensors (exact conversions), or
    ``None`` when there are none or the kernel refuses them."""
    half = (torch.float16, torch.bfloat16)

    def widen(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in half:
            return value.to(torch.float32)
        return value

    leaves, _ = tree_flatten((list(args), dict(kwargs)))
    if not any(isinstance(v, torch.Tensor) and v.dtype in half for v in leaves):
        return None
    wide_args, wide_kwargs = tree_map(widen, (list(args), dict(kwargs)))
    try:
        return cpu_call(op, wide_args, wide_kwargs)
    except Exception:
        return None


def _dense(value: Any) -> Any:
    """A tensor as a contiguous tensor (itself when it already is one); anything else as is."""
    return value.contiguous() if isinstance(value, torch.Tensor) else value


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def validate(
    op: OpOverload,
    kind: str,
    samples: Sequence[Sample],
    release: Release,
    *,
    layout_checks: bool = True,
) -> Verdict:
    """Run candidate ``kind`` of ``op`` on every sample at ``release`` (see the module
    docstring). A captured sample that does not hold stops the checks early."""
    from spyre_adapters.library.op_bridge import op_name

    impl = candidate(op, kind)
    checks: list[Check] = []
    for sample in samples:
        check = _check(op, impl, sample, release, layout_checks)
        checks.append(check)
        if sample.captured and check.outcome != "holds":
            break
    return Verdict(op_name(op), kind, release.name, tuple(checks))
