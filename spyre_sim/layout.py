"""Layout and capability rules of the device, each tied to a gap id of the catalogue.

A rule is a small function that looks at one op call (the host tensors and arguments) and
returns the reason it cannot lower, or ``None``. It is active only while the catalogue says its
gap is open at the active release (``Release.gap_open(gap)``), and it is evaluated only when a
decision is not yet cached (the cache key holds dtypes, shapes and, for rules that read them,
the non-tensor arguments). Rules are registered with :func:`layout_rule`.

Two families:

- **layout** rules (``SpyreLayoutError``; switched off by ``configure(layout_checks=False)``):
  ``stick-align``, ``sub-stick-head``, ``offset-slice``, ``rank-4d``, ``zero-length``,
  ``core-span``;
- **capability** rules (``SpyreLoweringError``; always on): ``bf16``, ``dtype-cast``,
  ``sdpa-gqa``, ``moe-topk`` and ``topk-split`` (top-k's k), ``bool-index``, ``pow-exponent``
  and ``pow-int-base`` (pow's exponent and base).

The exact shapes that trigger each layout rule (a stick is 64 elements of a 2-byte dtype):

- ``stick-align``: ``mm``/``addmm`` (what ``nn.Linear`` reaches) whose reduction dim K (the
  input's last dim: hidden or intermediate size) is not a multiple of 64. Activation-by-
  activation ``bmm`` (attention: head_dim, sequence length) is not checked: the real stack pads
  those partial sticks. Real text: ``Unsupported stick expression``.
- ``sub-stick-head``: (a) a ``view``/``reshape`` that splits the last (stick) dim into several
  dims whose new last dim is shorter than a stick, e.g. ``[b, s, 64] -> [b, s, 4, 16]`` (heads
  of head_dim < 64; a ``-1`` is resolved as ``view`` resolves it, and adding unit dims, as in
  ``[4] -> [4, 1]``, is not a split); (b) a slice or split of a floating tensor's stick dim into
  two equal halves shorter than a stick (stock rotate_half with head_dim < 128: "RoPE needs
  head_dim / 2 >= 64", docs/STACK.md §3; integer index tensors cut in two are not RoPE and meet only
  ``offset-slice``).
  Real text: ``Could not find a host dimension matching stick expr``.
- ``offset-slice``: ``slice``/``split``/``select``/``unbind`` of the last dim at an offset
  that is not a multiple of 64. Real text: ``non-zero offset assertion in stickify``.
- ``rank-4d``: a tensor argument, or the target shape of ``view``/``expand``/``unsqueeze``, of
  more than 3 dims.
- ``zero-length``: a tensor argument with zero elements (also checked on host->device copies).
- ``core-span``: a matmul weight whose stick count splits over the 32 cores only into
  per-core spans above 256 MB (an LM head with a vocab of many sticks with a large prime
  factor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spyre_sim.catalogue import Release

__all__ = [
    "CORE_COUNT",
    "CORE_SPAN_BYTES",
    "STICK_BYTES",
    "LayoutRule",
    "active_rules",
    "layout_rule",
    "rules",
    "stick_elements",
]

STICK_BYTES = 128
CORE_COUNT = 32
CORE_SPAN_BYTES = 256 * 1024 * 1024

Check = Callable[[str, Sequence[Any], Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class LayoutRule:
    """One rule: ``check(packet, args, kwargs)`` (host tensors) returns why the op cannot lower, or ``None``."""

    gap: str
    packets: frozenset[str] | None  # None: every op
    uses_args: bool  # reads non-tensor arguments (they join the decision cache key)
    layout: bool  # a layout rule (switched off by layout_checks=False) vs a capability rule
    check: Check
    text: str  # the real stack's error text, quoted in messages


_RULES: list[LayoutRule] = []


def layout_rule(
    gap: str,
    *,
    ops: Sequence[str] | None = None,
    uses_args: bool = False,
    layout: bool = True,
    text: str = "",
) -> Callable[[Check], Check]:
    """Register ``check`` as the rule of ``gap`` for the ATen packets ``ops`` (all if None)."""

    def register(check: Check) -> Check:
        packets = frozenset(ops) if ops is not None else None
        _RULES.append(LayoutRule(gap, packets, uses_args, layout, check, text))
        return check

    return register


def rules() -> tuple[LayoutRule, ...]:
    """Every registered rule."""
    return tuple(_RULES)


def _gap_open(release: Release, gap: str) -> bool:
    # every release (a user one too: it extends a built-in one) knows every built-in gap id,
    # so an unknown id is a misspelt rule: raise rather than switch the rule off
    return release.gap_open(gap)


def active_rules(release: Release, packet: str, layout_checks: bool) -> tuple[LayoutRule, ...]:
    """The rules that apply to ``packet`` at ``release`` (layout ones only if checks are on)."""
    return tuple(
        r
        for r in _RULES
        if (r.packets is None or packet in r.packets)
        and (layout_checks or not r.layout)
        and _gap_open(release, r.gap)
    )


def stick_elements(dtype: torch.dtype) -> int:
    """Elements per 128-byte stick for ``dtype``."""
    return STICK_BYTES // max(1, dtype.itemsize)


def _tensors(args: Sequence[Any]) -> Iterator[torch.Tensor]:
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b


def _shape(t: torch.Tensor) -> list[int]:
    return list(t.shape)


def _last_dim(t: torch.Tensor, dim: int) -> bool:
    return t.dim() > 0 and dim % t.dim() == t.dim() - 1


# --- layout rules -------------------------------------------------------------------------


@layout_rule("rank-4d", text="tensors of more than 3 dims are not supported")
def _rank(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    for t in _tensors(args):
        if t.dim() > 3:
            return f"a {t.dim()}-D tensor {_shape(t)}; the device holds tensors of up to 3 dims"
    return None


@layout_rule(
    "rank-4d",
    ops=("aten.view", "aten._unsafe_view", "aten.expand", "aten.reshape", "aten.unsqueeze"),
    uses_args=True,
    text="tensors of more than 3 dims are not supported",
)
def _rank_target(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if len(args) < 2:
        return None
    target = args[1]
    if isinstance(target, int) and isinstance(args[0], torch.Tensor):  # unsqueeze(dim)
        rank = args[0].dim() + 1
    elif isinstance(target, (list, tuple)):
        rank = len(target)
    else:
        return None
    if rank > 3:
        return f"the result would be {rank}-D {list(target) if isinstance(target, (list, tuple)) else ''}; the device holds tensors of up to 3 dims"
    return None


@layout_rule("zero-length", text="zero-length tensor in host->device copy")
def _zero_length(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    for t in _tensors(args):
        if t.numel() == 0 and t.dim() > 0:
            return f"a zero-length tensor {_shape(t)}"
    return None


_MATMULS = ("aten.mm", "aten.addmm")


def _matmul_operands(packet: str, args: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor] | None:
    first = 1 if packet == "aten.addmm" else 0  # addmm(bias, a, b)
    if len(args) < first + 2:
        return None
    a, b = args[first], args[first + 1]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2:
        return a, b
    return None


@layout_rule("stick-align", ops=_MATMULS, text="Unsupported stick expression")
def _stick_align(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    operands = _matmul_operands(packet, args)
    if operands is None:
        return None
    a, b = operands
    if a.dtype.itemsize != 2:
        return None
    k = a.shape[-1]
    stick = stick_elements(a.dtype)
    if k % stick:
        return (
            f"the reduction dim K={k} of a matmul {_shape(a)} @ {_shape(b)} is not a multiple "
            f"of {stick} (one stick); hidden and intermediate sizes must be stick aligned"
        )
    return None


@layout_rule("core-span", ops=_MATMULS, text="per-core span overflow")
def _core_span(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    operands = _matmul_operands(packet, args)
    if operands is None:
        return None
    _, w = operands
    if w.dim() != 2:
        return None
    k, n = w.shape
    stick = stick_elements(w.dtype)
    sticks = -(-n // stick)
    cores = max(d for d in range(1, CORE_COUNT + 1) if sticks % d == 0)
    span = (sticks // cores) * STICK_BYTES * k
    if span > CORE_SPAN_BYTES:
        return (
            f"a weight {_shape(w)} has {sticks} sticks, which divide over at most {cores} of "
            f"{CORE_COUNT} cores: {span / 2**20:.0f} MB per core exceeds the 256 MB span; pad "
            "the dim to a stick count with small prime factors"
        )
    return None


_VIEWS = ("aten.view", "aten._unsafe_view", "aten.reshape")
_SPLITS = ("aten.split", "aten.unsafe_split", "aten.split_with_sizes")


def _pieces(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(offset, length)`` of the pieces a slicing op cuts from the last dim (empty if the op
    does not cut the last dim)."""
    x = args[0]
    last = x.shape[-1]

    def arg(i: int, name: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(name, default)

    if packet in ("aten.slice", "aten.narrow"):
        dim = arg(1, "dim", 0)
        if not _last_dim(x, dim):
            return []
        start = arg(2, "start", None) or 0
        if packet == "aten.narrow":
            length = arg(3, "length", last)
            end = start + length
            step = 1
        else:
            end = arg(3, "end", None)
            end = last if end is None else end
            step = arg(4, "step", 1)
        start = start + last if start < 0 else start
        end = end + last if end < 0 else end
        start, end = max(0, min(start, last)), max(0, min(end, last))
        if step != 1 or end <= start or (start == 0 and end == last):
            return []
        return [(start, end - start)]
    if packet in _SPLITS:
        sizes = arg(1, "split_size", None)
        if sizes is None:
            sizes = kwargs.get("split_sizes")
        dim = arg(2, "dim", 0)
        if not _last_dim(x, dim):
            return []
        if isinstance(sizes, int):
            if sizes <= 0 or sizes >= last:
                return []
            lengths = [min(sizes, last - o) for o in range(0, last, sizes)]
        else:
            lengths = [int(v) for v in sizes]
        out, acc = [], 0
        for n in lengths:
            out.append((acc, n))
            acc += n
        return out
    if packet == "aten.select":
        dim, index = arg(1, "dim", 0), arg(2, "index", 0)
        if not _last_dim(x, dim):
            return []
        return [(index + last if index < 0 else index, 1)]
    if packet == "aten.unbind":
        dim = arg(1, "dim", 0)
        if not _last_dim(x, dim) or last <= 1:
            return []
        return [(i, 1) for i in range(last)]
    return []


@layout_rule(
    "sub-stick-head",
    ops=(*_VIEWS, "aten.slice", "aten.narrow", *_SPLITS),
    uses_args=True,
    text="Could not find a host dimension matching stick expr",
)
def _sub_stick(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if not args or not isinstance(args[0], torch.Tensor) or args[0].dim() == 0:
        return None
    x = args[0]
    stick = stick_elements(x.dtype)
    last = x.shape[-1]
    if packet in _VIEWS:
        target = args[1] if len(args) > 1 else kwargs.get("size")
        if isinstance(target, (list, tuple)) and _splits_stick_dim(x, target, stick):
            return (
                f"a view {_shape(x)} -> {list(target)} splits the stick dim {last} into "
                f"pieces of {target[-1]} < {stick} elements (heads with head_dim < {stick})"
            )
        return None
    if not x.is_floating_point():
        return None  # rotary halves are float activations; index tensors meet offset-slice
    pieces = _pieces(packet, args, kwargs)
    half = last // 2
    halves = [p for p in pieces if p[1] == half]
    if last % 2 == 0 and half < stick and halves and len(pieces) <= 2:
        return (
            f"cutting {_shape(x)} at [{halves[0][0]}:{halves[0][0] + half}] halves the stick dim "
            f"into pieces of {half} < {stick} elements (RoPE on halves needs head_dim / 2 >= "
            f"{stick}; pad heads to {2 * stick})"
        )
    return None


def _inferred(x: torch.Tensor, target: Sequence[int]) -> list[int] | None:
    """``target`` with a ``-1`` resolved as ``view`` resolves it (None if it cannot be)."""
    sizes = [int(v) for v in target]
    if sizes.count(-1) > 1:
        return None
    if -1 in sizes:
        known = 1
        for v in sizes:
            if v != -1:
                known *= v
        if known == 0 or x.numel() % known:
            return None
        sizes[sizes.index(-1)] = x.numel() // known
    return sizes


def _splits_stick_dim(x: torch.Tensor, target: Sequence[int], stick: int) -> bool:
    """``x.view(target)`` keeps the leading dims and splits the last into >= 2 dims whose last
    is shorter than a stick."""
    lead = list(x.shape[:-1])
    sizes = _inferred(x, target)
    if sizes is None or len(sizes) <= x.dim() or sizes[: len(lead)] != lead:
        return False
    tail = sizes[len(lead) :]
    prod = 1
    for v in tail:
        prod *= v
    # a split needs two real pieces: [4] -> [4, 1] only adds a unit dim (an unsqueeze)
    pieces = sum(v > 1 for v in tail)
    return prod == x.shape[-1] and 0 < tail[-1] < stick and tail[-1] < x.shape[-1] and pieces >= 2


@layout_rule(
    "offset-slice",
    ops=("aten.slice", "aten.narrow", *_SPLITS, "aten.select", "aten.unbind"),
    uses_args=True,
    text="non-zero offset assertion in stickify",
)
def _offset_slice(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if not args or not isinstance(args[0], torch.Tensor) or args[0].dim() == 0:
        return None
    x = args[0]
    stick = stick_elements(x.dtype)
    for offset, _ in _pieces(packet, args, kwargs):
        if offset % stick:
            return (
                f"slicing the stick dim of {_shape(x)} at offset {offset}, which is not a "
                f"multiple of {stick} (one stick)"
            )
    return None


# --- capability rules (always on) --------------------------------------------------------


@layout_rule("bf16", layout=False, text="bfloat16 is not supported")
def _bf16(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    for t in _tensors(args):
        if t.dtype is torch.bfloat16:
            return f"a bfloat16 tensor {_shape(t)}; the device computes in fp16 (DL16) only"
    return None


_FP32 = (torch.float32, torch.float64)


@layout_rule("dtype-cast", ops=("aten._to_copy",), uses_args=True, layout=False)
def _upcast(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    dtype = kwargs.get("dtype")
    if dtype in _FP32 and args and isinstance(args[0], torch.Tensor):
        return (
            f"a cast of {_shape(args[0])} from {args[0].dtype} to {dtype} on the device "
            "(an fp32 upcast, e.g. inside a norm); keep the computation in the input dtype"
        )
    return None


@layout_rule("sdpa-gqa", ops=("aten.scaled_dot_product_attention",), uses_args=True, layout=False)
def _gqa(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    if len(args) < 2 or not all(isinstance(t, torch.Tensor) for t in args[:2]):
        return None
    q, k = args[0], args[1]
    gqa = bool(kwargs.get("enable_gqa", False))
    if gqa or (q.dim() >= 3 and k.dim() >= 3 and q.shape[-3] != k.shape[-3]):
        return (
            f"grouped-query attention (q heads {q.shape[-3]}, k/v heads {k.shape[-3]}); SDPA "
            "lowers for multi-head attention only; repeat k/v heads before attention"
        )
    return None


TOPK_PER_CORE = 4
"""The most ranks one core's top-k kernel emits (torch-spyre #1637, #3782)."""


def _topk_k(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    k = args[1] if len(args) > 1 else kwargs.get("k")
    return k if isinstance(k, int) and not isinstance(k, bool) else None


@layout_rule("moe-topk", ops=("aten.topk",), uses_args=True, layout=False)
def _topk(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    k = _topk_k(args, kwargs)
    if k is not None and k > TOPK_PER_CORE:
        return (
            f"topk with k={k}: the top-k kernel returns at most {TOPK_PER_CORE} values per "
            "call (MoE routing and top-k sampling alike); take the top-k on the host, or in "
            f"rounds of at most {TOPK_PER_CORE}"
        )
    return None


def topk_split(k: int, cores: int = CORE_COUNT) -> int | None:
    """The number of cores top-k splits ``k`` over: the smallest divisor ``d <= cores`` of
    ``k`` with ``k / d <= 4`` (torch-spyre #3782), or ``None`` when there is none."""
    for d in range(1, cores + 1):
        if k % d == 0 and k // d <= TOPK_PER_CORE:
            return d
    return None


@layout_rule("topk-split", ops=("aten.topk",), uses_args=True, layout=False)
def _topk_split(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    k = _topk_k(args, kwargs)
    if k is not None and k > 0 and topk_split(k) is None:
        return (
            f"topk with k={k}: no divisor within {CORE_COUNT} cores gives k_per_core <= "
            f"{TOPK_PER_CORE} (k must split over the cores at most {TOPK_PER_CORE} per core, "
            f"so k <= {TOPK_PER_CORE * CORE_COUNT} and e.g. no prime above {TOPK_PER_CORE}); "
            "round k to one that splits, or take the top-k on the host"
        )
    return None


_POW_CHAIN = frozenset({2, 3, 4})
"""The scalar exponents the stack's pow multiply chain compiles before torch-spyre #4479."""


def _pow_exponent(args: Sequence[Any], kwargs: Mapping[str, Any]) -> object:
    return args[1] if len(args) > 1 else kwargs.get("exponent")


@layout_rule("pow-exponent", ops=("aten.pow",), uses_args=True, layout=False)
def _pow_exp(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    exponent = _pow_exponent(args, kwargs)
    if isinstance(exponent, torch.Tensor) or not isinstance(exponent, (int, float)):
        return None  # a tensor exponent is its own rule (pow-tensor-exponent)
    if isinstance(exponent, bool) or float(exponent) in _POW_CHAIN:
        return None
    return (
        f"pow with exponent {exponent!r}: only the exponents 2, 3 and 4 of the multiply chain "
        "compile; others compile to a runtime exception; write it with sqrt / rsqrt / "
        "reciprocal / exp and log, or as products"
    )


@layout_rule("pow-int-base", ops=("aten.pow",), layout=False)
def _pow_int(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    base = args[0] if args else kwargs.get("self")
    if isinstance(base, torch.Tensor) and not base.is_floating_point():
        return (
            f"pow of an integer tensor {_shape(base)} ({base.dtype}): pow decomposes through "
            "floating-point ops; cast the base to a float dtype first"
        )
    return None


@layout_rule("bool-index", ops=("aten.index", "aten.index_put_", "aten.index_put"), layout=False)
def _bool_index(packet: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
    for t in indices or ():
        if isinstance(t, torch.Tensor) and t.dtype is torch.bool:
            return f"indexing with a boolean mask {_shape(t)} (the result shape depends on data)"
    return None
