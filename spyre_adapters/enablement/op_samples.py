"""The calls a bridge candidate is validated on: a :class:`Sample` is one call's arguments on the
CPU, captured from a device call (:func:`sample_of`) or made from one as a variant
(:func:`variants`, :func:`shifted_sizes`). See :mod:`spyre_adapters.enablement.op_validation`
for what each variant is for and how a candidate is judged on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_flatten, tree_map

__all__ = [
    "SHIFT",
    "SHIFT_BUDGET",
    "Sample",
    "describe",
    "sample_of",
    "shifted_sizes",
    "to_cpu",
    "variants",
]


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


# -- samples -----------------------------------------------------------------------------------


def _whole(value: Any) -> int | None:
    """An int scalar, or a float one holding a whole number, as an int; ``None`` for any other
    value (``bool`` included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def _sorted_rows(value: torch.Tensor) -> bool:
    """Whether each row (last dim) of ``value`` is non-decreasing: offsets, cumulative counts,
    sorted tables."""
    return value.dim() >= 1 and value.numel() > 1 and bool((value.diff(dim=-1) >= 0).all())


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe_value(v) for v in value) + "]"
    if isinstance(value, float) and _whole(value) is not None:
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def describe(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The signature of a call: ``float16[1, 8], int64[8], 1`` (tensors as dtype and shape)."""
    parts = [_describe_value(a) for a in args]
    parts += [f"{k}={_describe_value(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    return value


def sample_of(args: Sequence[Any], kwargs: Mapping[str, Any], label: str) -> Sample:
    """A captured sample: copies on the CPU of the arguments of a device call (a transfer of
    each device tensor)."""
    cpu_args, cpu_kwargs = tree_map(to_cpu, (list(args), dict(kwargs)))
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
    monotone = _sorted_rows(value)
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
    monotone = not out.is_floating_point() and _sorted_rows(out)
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


def _reversed_layout(value: torch.Tensor) -> torch.Tensor:
    """The same values with the dims stored in reverse order (the outermost dim innermost in
    memory), for a tensor with at least two dims of size above one; the tensor itself
    otherwise. A device view hands a host kernel such strides (Mask2Former's deformable
    attention at batch size one: ``flatten(2).transpose(1, 2).reshape(...)``), and PyTorch's
    fp16 CPU ``grid_sampler_2d`` returns NaN for some of them where a contiguous copy returns
    none."""
    if sum(size > 1 for size in value.shape) < 2:
        return value
    order = list(range(value.dim()))[::-1]
    return value.permute(order).contiguous().permute(order)


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
    if any(_reversed_layout(t) is not t for t in tensors):
        out.append(_remap(sample, "memory order reversed", lambda t: _reversed_layout(fresh(t))))
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
    """A whole-number scalar (:func:`_whole`) of at least 2, or a list holding one."""
    if isinstance(value, (list, tuple)):
        return any(_is_size(v) for v in value)
    whole = _whole(value)
    return whole is not None and whole >= 2


def _shift_scalar(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_shift_scalar(v) for v in value)
    whole = _whole(value)
    if whole is None:
        return value
    return float(_shift(whole)) if isinstance(value, float) else _shift(whole)


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
    if _sorted_rows(value):
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
    positional = [names[i] if i < len(names) else "" for i in range(len(sample.args))]
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
