"""Is a bridge candidate for one ATen op exact at a release? Checked on the device, against the CPU.

:func:`validate` runs a candidate form of an op (see :mod:`spyre_adapters.library.op_bridge`)
on the emulated device at a release, inside the model scope (so every op it issues is judged
by the release, layout rules included), on a list of :class:`Sample` arguments, and compares
each result with the CPU kernel of the op on the same values:

- the **captured** samples: the arguments a model really passed to the op (recorded by
  ``spyre-adapters bridge`` when the op stopped the model);
- **variants** of the first one (:func:`variants`): the same shapes with fresh random values,
  with special values (zeros, signed zeros, the extremes of the range, infinities, NaN, ties),
  every size above one doubled, every such size plus one, for a call with a scalar argument
  that sets a size (``bins``, ``minlength``, ``k``, a kernel size) every integer of the call
  moved up by :data:`SHIFT` (:func:`shifted_sizes`: a tester's 4 experts become a real
  model's 64), another dtype (bfloat16 for
  half-precision inputs where the release stores it, int64 for int32 inputs), and, for a call
  of several tensors, each 1-D one left empty (a table with no entries).

The reference is the CPU kernel on the values **as the device holds them** (each sample moved
to the device and back, so DL16 rounding and saturation are the same on both sides), through
:func:`~spyre_adapters.library.op_bridge.cpu_call`. A check ``holds`` when every output (and
every input the op writes in place) agrees: integer and bool results exactly, floating-point
results within ``atol = rtol =`` :data:`TOLERANCE` (the per-op bar of the real stack's tests
in fp16) after the reference is stored as the device stores it (DL16), NaN matching NaN or
-inf (a NaN entering the device reads back as -inf: gap ``nan-entry``, at every release, so a
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_flatten, tree_map

from spyre_adapters.library import _pow_rewrites  # noqa: F401  (registers its rewrites)
from spyre_adapters.library.op_bridge import candidate, cpu_call

if TYPE_CHECKING:
    from spyre_sim.catalogue import Release

__all__ = [
    "TOLERANCE",
    "Check",
    "Sample",
    "Verdict",
    "describe",
    "sample_of",
    "shifted_sizes",
    "validate",
    "variants",
]

#: atol and rtol of a floating-point comparison (SPYRE.md section 7: per-op tests in fp16).
TOLERANCE = 5e-3
#: Gaps of what the device can store or lay out: a variant meeting them is skipped.
_STORAGE_GAPS = frozenset({"bf16", "bool-storage", "zero-length", "fp32-storage", "rank-4d"})


@dataclass(frozen=True)
class Sample:
    """Arguments of one call of an op, on the CPU. ``label`` says where they came from
    (``"captured in llama: model.layers.0"``, ``"fresh values"``, ...)."""

    label: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    captured: bool = False

    @property
    def signature(self) -> str:
        """``float16[16], bins=4, min=0, max=3``: dtypes and shapes of tensors, other values."""
        return describe(self.args, self.kwargs)


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


# -- samples -----------------------------------------------------------------------------------


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe_value(v) for v in value) + "]"
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def describe(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The signature of a call: ``float16[1, 8], int64[8], 1`` (tensors as dtype and shape)."""
    parts = [_describe_value(a) for a in args]
    parts += [f"{k}={_describe_value(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    return value


def sample_of(args: Sequence[Any], kwargs: Mapping[str, Any], label: str) -> Sample:
    """A captured sample: copies on the CPU of the arguments of a device call (a transfer of
    each device tensor)."""
    cpu_args, cpu_kwargs = tree_map(_to_cpu, (list(args), dict(kwargs)))
    return Sample(label, tuple(cpu_args), dict(cpu_kwargs), captured=True)


def _fresh(
    value: torch.Tensor,
    shape: Sequence[int],
    generator: torch.Generator,
    sizes: Mapping[int, int] | None = None,
) -> torch.Tensor:
    """Random values of ``value``'s dtype, in its range, of ``shape``. Integers keep the
    structure of the captured ones: non-decreasing rows (offsets) stay non-decreasing, and
    offsets that end at a size of the call keep ending at that size (``sizes`` maps the
    captured sizes to the variant's); other integers are drawn from the captured values."""
    if value.dtype is torch.bool:
        return torch.rand(tuple(shape), generator=generator) < 0.5
    if value.is_floating_point():
        finite = value[torch.isfinite(value)].float() if value.numel() else value.float()
        mean = float(finite.mean()) if finite.numel() else 0.0
        std = float(finite.std()) if finite.numel() > 1 else 1.0
        std = std if math.isfinite(std) and std > 0 else 1.0
        noise = torch.randn(tuple(shape), generator=generator) * std + mean
        return noise.to(value.dtype)
    if value.is_complex():
        return value.new_zeros(tuple(shape))
    sizes = sizes or {}
    monotone = value.dim() >= 1 and value.numel() > 1 and bool((value.diff(dim=-1) >= 0).all())
    if not monotone and value.numel():
        # indices, class targets and their sentinels (-100 for "ignore"): a value between two
        # captured ones need not be valid, so the values are drawn from the captured ones
        seen = value.reshape(-1).to(torch.int64)
        picks = torch.randint(0, seen.numel(), tuple(shape), generator=generator)
        return seen[picks].to(value.dtype)
    low = int(value.min()) if value.numel() else 0
    high = int(value.max()) if value.numel() else 1
    high = max(high, sizes.get(high, high))
    out = torch.randint(low, high + 1, tuple(shape), generator=generator)
    if monotone and out.numel():
        out = out.sort(dim=-1).values
        last = int(value.reshape(-1, value.shape[-1])[0, -1])
        if last in sizes or last in sizes.values() or shape == list(value.shape):
            out[..., -1] = sizes.get(last, last)
    return out.to(value.dtype)


def _specials(value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``value`` with about a quarter of its elements replaced by special values and ties
    (integers that were sorted, such as offsets, are sorted again and keep their end)."""
    out = value.clone()
    if out.numel() == 0 or out.dtype is torch.bool:
        return out
    monotone = not out.is_floating_point() and out.dim() >= 1 and out.numel() > 1
    monotone = monotone and bool((out.diff(dim=-1) >= 0).all())
    flat = out.reshape(-1)
    count = max(1, flat.numel() // 4)
    where = torch.randperm(flat.numel(), generator=generator)[:count]
    if out.is_floating_point():
        big = float(torch.finfo(out.dtype).max) / 2
        pool = torch.tensor(
            [0.0, -0.0, 1.0, -1.0, big, -big, math.inf, -math.inf, math.nan], dtype=out.dtype
        )
    else:
        pool = torch.stack([flat.min(), flat.max(), flat[0]]).to(out.dtype)
    picks = torch.randint(0, pool.numel(), (count,), generator=generator)
    flat[where] = pool[picks]
    ties = torch.randperm(flat.numel(), generator=generator)[: max(1, flat.numel() // 8)]
    flat[ties] = flat[ties[0]].clone()
    if monotone:  # offsets stay sorted and keep their end
        last = value[..., -1:].clone()
        out = out.sort(dim=-1).values
        out[..., -1:] = last
        out = torch.minimum(out, last)
    return out


def _tensors(sample: Sample) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((list(sample.args), dict(sample.kwargs)))
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _remap(
    sample: Sample,
    label: str,
    make: Callable[[torch.Tensor], torch.Tensor],
) -> Sample:
    args, kwargs = tree_map(
        lambda v: make(v) if isinstance(v, torch.Tensor) else v,
        (list(sample.args), dict(sample.kwargs)),
    )
    return Sample(label, tuple(args), dict(kwargs))


def _sizes(tensors: Sequence[torch.Tensor], grow: Callable[[int], int]) -> dict[int, int]:
    return {size: grow(size) for t in tensors for size in t.shape if size > 1}


def variants(
    sample: Sample, *, seed: int = 0, bf16: bool = True, op: OpOverload | None = None
) -> list[Sample]:
    """Other inputs for the same call (see the module docstring). Sizes are changed
    consistently across the tensors (every dimension of size ``s > 1`` becomes ``f(s)``), so
    shapes that must agree keep agreeing; integer values stay within the range of the
    captured ones (indices stay valid, offsets stay sorted). Given the ``op``, a call with
    size-setting scalar arguments also gets :func:`shifted_sizes`."""
    generator = torch.Generator().manual_seed(seed)
    tensors = _tensors(sample)
    if not tensors:
        return []

    def fresh(t: torch.Tensor, sizes: Mapping[int, int] | None = None) -> torch.Tensor:
        shape = [sizes.get(s, s) for s in t.shape] if sizes else list(t.shape)
        return _fresh(t, shape, generator, sizes)

    out = [
        _remap(sample, "fresh values", fresh),
        _remap(sample, "special values", lambda t: _specials(fresh(t), generator)),
    ]
    for label, grow in (("sizes doubled", lambda s: 2 * s), ("sizes + 1", lambda s: s + 1)):
        sizes = _sizes(tensors, grow)
        out.append(_remap(sample, label, lambda t, sizes=sizes: fresh(t, sizes)))  # type: ignore[misc]
    shifted = shifted_sizes(sample, op, generator) if op is not None else None
    if shifted is not None:
        out.append(shifted)
    if bf16 and any(t.dtype is torch.float16 for t in tensors):
        out.append(
            _remap(
                sample,
                "bfloat16",
                lambda t: fresh(t).to(torch.bfloat16) if t.dtype is torch.float16 else fresh(t),
            )
        )
    if any(t.dtype is torch.int32 for t in tensors):
        out.append(
            _remap(
                sample,
                "int64",
                lambda t: fresh(t).to(torch.int64) if t.dtype is torch.int32 else fresh(t),
            )
        )
    if len(tensors) > 1:
        # a lookup table, sorted sequence or index list left empty: the edge case where
        # decompositions take a shortcut (PyTorch's bucketize returns zeros of the input's
        # floating dtype for no boundaries, where the kernel returns int64)
        for number, table in enumerate(tensors, 1):
            if table.dim() == 1 and table.numel() > 0:
                label = f"empty 1-D argument {number}"
                out.append(
                    _remap(sample, label, lambda t, e=table: t[:0].clone() if t is e else fresh(t))  # type: ignore[misc]
                )
    return out


#: How far :func:`shifted_sizes` moves every integer of at least 2: a tester's 4 experts become
#: 64, a real model's count.
SHIFT = 60
#: The most elements a shifted call may hold (all its tensors together); a larger one is not
#: made.
SHIFT_BUDGET = 1 << 23
#: Scalar arguments that name a dimension, a dtype or a mode rather than set a size; never
#: shifted.
_NOT_SIZES = frozenset(
    {
        "dim",
        "dims",
        "dim0",
        "dim1",
        "start_dim",
        "end_dim",
        "dimension",
        "axis",
        "dtype",
        "out_dtype",
        "layout",
        "memory_format",
        "reduction",
        "ignore_index",
        "blank",
        "padding_idx",
        "exponent",
        "decimals",
        "correction",
        "p",
        "offset",
    }
)


def _shift(value: int) -> int:
    return value + SHIFT if value >= 2 else value


def _is_size(value: Any) -> bool:
    """An integer scalar (or an integer-valued float one) of at least 2."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 2
    if isinstance(value, float):
        return math.isfinite(value) and value == int(value) and value >= 2
    if isinstance(value, (list, tuple)):
        return any(_is_size(v) for v in value)
    return False


def _shift_scalar(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _shift(value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return float(_shift(int(value)))
    if isinstance(value, (list, tuple)):
        return type(value)(_shift_scalar(v) for v in value)
    return value


def _integral(value: torch.Tensor) -> bool:
    """Integers, or floating-point values that are all whole numbers (ids held as floats)."""
    if value.dtype is torch.bool or value.is_complex():
        return False
    if not value.is_floating_point():
        return True
    finite = value[torch.isfinite(value)]
    return bool(finite.numel()) and bool((finite == finite.round()).all())


def _shift_tensor(value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Every size of at least 2 shifted; whole-number values shifted the same way (ids and
    offsets stay in range and in order), other values drawn afresh."""
    shape = [_shift(s) for s in value.shape]
    if not _integral(value) or not value.numel():
        return _fresh(value, shape, generator)
    flat = value.reshape(-1).to(torch.float64)
    picks = torch.randint(0, flat.numel(), (math.prod(shape),), generator=generator)
    if value.dim() >= 1 and value.numel() > 1 and bool((value.diff(dim=-1) >= 0).all()):
        # offsets: sorted again, and the last one keeps its place (the end of the rows)
        drawn = flat[picks].reshape(shape).sort(dim=-1).values
        drawn[..., -1] = float(flat[-1])
    else:
        drawn = flat[picks].reshape(shape)
    moved = torch.where(drawn >= 2, drawn + SHIFT, drawn)
    return moved.to(value.dtype)


def shifted_sizes(
    sample: Sample, op: OpOverload, generator: torch.Generator | None = None
) -> Sample | None:
    """The call as a larger model makes it: every integer of at least 2 -- each dimension,
    each size-setting scalar argument (``bins``, ``minlength``, ``k``, kernel sizes; not the
    ones that name a dimension, a dtype or a mode, :data:`_NOT_SIZES`) and each whole-number
    value of a tensor -- moved up by :data:`SHIFT`. A shift keeps differences, so the
    relations a tester's call holds keep holding (``max = bins - 1``, ids below the expert
    count, offsets ending at the row count), while the values reach those of real
    configurations: ``histc(ids, bins=4, min=0, max=3)`` becomes ``bins=64, max=63`` with ids
    up to 63. ``None`` when the call has no size-setting scalar (the size variants cover it) or
    the shifted call would hold more than :data:`SHIFT_BUDGET` elements."""
    generator = generator or torch.Generator().manual_seed(0)
    names = [argument.name for argument in op._schema.arguments]
    positional = [names[i] if i < len(names) else "" for i, value in enumerate(sample.args)]
    sized = [
        name not in _NOT_SIZES and _is_size(value)
        for name, value in [*zip(positional, sample.args, strict=True), *sample.kwargs.items()]
        if not isinstance(value, torch.Tensor)
    ]
    if not any(sized):
        return None
    tensors = _tensors(sample)
    if sum(math.prod(_shift(s) for s in t.shape) for t in tensors) > SHIFT_BUDGET:
        return None

    def move(name: str, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return _shift_tensor(value, generator)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(move(name, v) for v in value)  # index lists: tensors and None
        if name in _NOT_SIZES:
            return value
        return _shift_scalar(value)

    args = tuple(move(name, value) for name, value in zip(positional, sample.args, strict=True))
    kwargs = {name: move(name, value) for name, value in sample.kwargs.items()}
    return Sample(f"sizes + {SHIFT}", args, kwargs)


# -- comparison --------------------------------------------------------------------------------


def _stored_like_device(value: torch.Tensor) -> torch.Tensor:
    from spyre_sim.numerics import round_to_dl16

    if value.dtype is torch.float16:
        return round_to_dl16(value)
    if value.dtype in (torch.float32, torch.float64):
        return round_to_dl16(value.to(torch.float16))  # the device stores fp32 as fp16
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
            held_args, held_kwargs = tree_map(_to_cpu, (device_args, device_kwargs))
        except Exception as error:
            return make("skipped", f"the device cannot hold these inputs: {_short(error)}")
        try:
            expected = cpu_call(op, held_args, held_kwargs)
        except Exception as error:
            if sample.captured:
                return make("raises", f"the CPU kernel refuses the captured call: {_short(error)}")
            return make("skipped", f"the CPU kernel refuses it: {_short(error)}")
        try:
            with spyre_sim.model_scope():
                got = impl(op, device_args, device_kwargs)
            got_cpu = tree_map(_to_cpu, got)
            written_cpu = [_to_cpu(device_args[i]) for i in _written(op) if i < len(device_args)]
        except SpyreLoweringError as error:
            storage = error.gap in _STORAGE_GAPS or isinstance(error, SpyreLayoutError)
            text = f"{error.op} does not lower at {release.name} (gap `{error.gap}`)"
            if storage and not sample.captured:
                return make("skipped", f"layout or storage rule: {text}")
            return make("raises", text)
        except Exception as error:
            return make("raises", _short(error))
    written_expected = [held_args[i] for i in _written(op) if i < len(held_args)]
    packet = "aten." + op._overloadpacket.__name__
    why = _differ(expected, got_cpu, WORKSPACE_RESULTS.get(packet, frozenset()))
    if why is None and written_expected:
        why = _differ(written_expected, written_cpu)
        why = None if why is None else f"an input written in place differs: {why}"
    return make("holds") if why is None else make("mismatch", why)


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
