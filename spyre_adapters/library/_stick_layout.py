"""Stick-aligned forms of the torch calls a model makes, computed while its forwards run.

The device stores the last dim of every tensor in sticks of 64 elements (128 bytes of a 2-byte
dtype; fp32 is stored as fp16). Three layout rules refuse ops whose shapes cut sticks:

- ``stick-align``: a matmul (``mm``/``addmm``, what ``nn.Linear`` reaches) whose reduction dim
  K is not a whole number of sticks (hidden 32, an FFN of 37);
- ``sub-stick-head``: a view that splits the last dim into pieces shorter than a stick (heads of
  head_dim 8: ``[b, s, 32] -> [b, s, 4, 8]``), and a slice or split that halves a last dim
  shorter than two sticks (stock ``rotate_half`` on such heads);
- ``offset-slice`` (until unaligned slices land): a slice of the last dim at an offset that is
  not a whole number of sticks.

And one miscompile: ``offset-view-input`` (until 2026.09), a copy or an attention that reads a
view starting inside a row of the buffer it was cut from reads from the start of that row
(packed Q|K|V: K and V come back as Q).

:class:`StickLayout` is a ``TorchFunctionMode`` that, while a model's forward runs, computes
each such call in an equivalent form the device lowers, and leaves every other call alone:

- **matmuls**: both operands zero-padded along K to whole sticks (``pad``, or ``cat`` with
  zeros where the release has no ``pad``); a parameter's padded copy is kept while the
  parameter is unchanged. The padded products are exact zeros, so the result is the stock one;
- **head views**: ``x.view(..., h, d)`` with ``d`` below a stick becomes ``x @ E`` (a 0/1
  placement matrix putting every ``d``-piece at the start of its own stick), a stick-aligned
  view ``[..., h, W]`` and the offset-0 crop ``[..., :d]``, made contiguous as the stock view
  of a contiguous tensor is;
- **cuts of the last dim** (halves below a stick; offsets inside a stick while ``offset-slice``
  is open; any non-zero offset while ``offset-view-input`` is miscompiled, so that no view
  starting inside a row is left for a copy or an attention to misread, and likewise a pick
  ``x[..., i, :]`` with ``i > 0`` of a ``[..., 3, d]`` packed view, computed on the flattened
  rows): ``x @ S`` with a 0/1 selection matrix ``S`` per piece; an assignment to such a cut (``scores[:, 1:] = -1e9`` in
  beam search) a ``where`` over a column mask, written back into the tensor.

Placement and selection matrices hold one 1 per column, so every result element is one input
element times 1 plus exact zeros: the same value in every dtype. (A NaN in an input row
reaches every element computed from that row, where the stock op would keep it in place.)
Nothing of the model changes: parameters, buffers, shapes of every output, caches and the
state dict are the stock ones; only the expression inside the forward differs.

The mode is a scoped mode of kind ``stick-layout`` (:mod:`spyre_adapters.library._scoped_modes`):
entered when a forward of the adapted model (or of a submodule called directly) starts, left
when it ends; ``restore`` removes it with the rest of the edit.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import spyre_sim
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import enabled, register_kind

__all__ = [
    "FEATURES",
    "KIND",
    "STICK",
    "StickLayout",
    "enable",
    "features_of",
    "stick_multiple",
]

#: Elements per stick for every floating dtype the device computes in.
STICK = 64

#: Features, by the gap each bridges.
FEATURES = frozenset({"stick-align", "sub-stick-head", "offset-slice", "offset-view-input"})


def stick_multiple(size: int) -> int:
    """``size`` rounded up to whole sticks."""
    return -(-size // STICK) * STICK


def features_of(module: nn.Module) -> frozenset[str]:
    """The features enabled on ``module`` (empty when none)."""
    return frozenset(enabled(module).get(KIND, frozenset()))


def enable(model: nn.Module, edit: Any, feature: str) -> None:
    """Enable ``feature`` on every module of ``model`` through ``edit`` (a ``ModelEdit``)."""
    if feature not in FEATURES:
        raise ValueError(f"unknown stick-layout feature {feature!r}; known: {sorted(FEATURES)}")
    enable_kind(model, edit, KIND, frozenset({feature}))


# --- the rewrites -----------------------------------------------------------------------------


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


_pad_lowers: dict[int, bool] = {}


def _pad_op_lowers() -> bool:
    """Whether the active release runs ``constant_pad_nd`` on the device (one op where ``cat``
    with zeros takes two); asked once per release change."""
    generation = spyre_sim.stack_generation()
    known = _pad_lowers.get(generation)
    if known is None:
        rule = spyre_sim.current_stack().op_rule("aten.constant_pad_nd")
        known = _pad_lowers[generation] = rule.decision.runs_on_device
    return known


def _pad_last(x: torch.Tensor, width: int) -> torch.Tensor:
    extra = width - x.shape[-1]
    if extra <= 0:
        return x
    if _pad_op_lowers():
        return torch.nn.functional.pad(x, (0, extra))
    return torch.cat([x, x.new_zeros((*x.shape[:-1], extra))], dim=-1)


def _pad_rows(w: torch.Tensor, height: int) -> torch.Tensor:
    """``w`` [..., K, N] zero-padded to [..., height, N]."""
    extra = height - w.shape[-2]
    if extra <= 0:
        return w
    return torch.cat([w, w.new_zeros((*w.shape[:-2], extra, w.shape[-1]))], dim=-2)


# Padded copies of weights, reused while the weight is unchanged (same tensor, same version,
# same release and device switches): an unchanged weight is padded once, not every forward.
_WEIGHTS_KEPT = 128
_padded_weights: OrderedDict[tuple[int, str, int], tuple[torch.Tensor, Any, torch.Tensor]] = (
    OrderedDict()
)


def _is_weight(t: torch.Tensor) -> bool:
    return isinstance(t, nn.Parameter) or bool(getattr(t, "_is_param", False))


def _padded_weight(w: torch.Tensor, width: int, along: str) -> torch.Tensor:
    """``w`` zero-padded to ``width`` along its last dim (``along="last"``) or its rows
    (``"rows"``), cached for parameters."""
    pad = _pad_last if along == "last" else _pad_rows
    if not _is_weight(w):
        return pad(w, width)
    key = (id(w), along, width)
    stamp = (w._version, spyre_sim.stack_generation(), spyre_sim.settings.generation)
    hit = _padded_weights.get(key)
    if hit is not None and hit[0] is w and hit[1] == stamp:
        _padded_weights.move_to_end(key)
        return hit[2]
    padded = pad(w, width)
    _padded_weights[key] = (w, stamp, padded)
    while len(_padded_weights) > _WEIGHTS_KEPT:
        _padded_weights.popitem(last=False)
    return padded


def padded_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` with the reduction dim K (``x``'s last, ``w``'s second to last) zero-padded
    to whole sticks."""
    width = stick_multiple(x.shape[-1])
    return torch.matmul(_pad_last(x, width), _padded_weight(w, width, "rows"))


def _reaches_mm(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``torch.matmul(a, b)`` folds into one 2-D matmul (``mm``), the op the
    stick-align rule checks: one operand 2-D and the other at least 2-D. (Both batched is a
    ``bmm``, whose partial sticks the stack pads itself.)"""
    return (a.dim() >= 2 and b.dim() == 2) or (a.dim() == 2 and b.dim() >= 2)


@functools.lru_cache(maxsize=256)
def _host_matrix(rows: int, cols: int, pairs: tuple[tuple[int, int], ...]) -> torch.Tensor:
    m = torch.zeros(rows, cols)
    if pairs:
        index = torch.tensor(pairs)
        m[index[:, 0], index[:, 1]] = 1.0
    return m


_device_matrices: dict[tuple[Any, ...], torch.Tensor] = {}


def _matrix(
    rows: int, cols: int, pairs: tuple[tuple[int, int], ...], like: torch.Tensor
) -> torch.Tensor:
    """A 0/1 matrix with ones at ``pairs``, in the dtype and on the device of ``like``."""
    key = (rows, cols, pairs, like.dtype, str(like.device))
    m = _device_matrices.get(key)
    if m is None:
        if len(_device_matrices) > 512:
            _device_matrices.clear()
        m = _device_matrices[key] = _host_matrix(rows, cols, pairs).to(like.device, like.dtype)
    return m


def _slot(d: int) -> int:
    """Width of the stick-aligned slot a ``d``-piece is placed in: whole sticks, and never
    exactly twice ``d`` (an offset-0 crop of half a slot reads as a rotate_half cut)."""
    width = stick_multiple(d)
    return width + STICK if 2 * d == width else width


def _inferred(x: torch.Tensor, target: Sequence[int]) -> list[int] | None:
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


def _head_split(x: torch.Tensor, target: Sequence[int]) -> list[int] | None:
    """The resolved sizes when ``x.view(target)`` splits the last dim into pieces shorter
    than a stick (keeping the leading dims), else None."""
    if not _floating(x) or x.dim() == 0:
        return None
    sizes = _inferred(x, target)
    lead = list(x.shape[:-1])
    if sizes is None or len(sizes) <= x.dim() or sizes[: len(lead)] != lead:
        return None
    tail = sizes[len(lead) :]
    prod = 1
    for v in tail:
        prod *= v
    d = tail[-1]
    if prod != x.shape[-1] or not 0 < d < STICK or d >= x.shape[-1] or sum(v > 1 for v in tail) < 2:
        return None
    return sizes


def split_heads(x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """``x.view(sizes)`` (a split of the last dim into pieces of ``d`` < a stick) computed in
    stick-aligned form: where the release slices the stick dim at any offset and there are
    more than two pieces, as a stack of the pieces; else as a placement matmul, a
    stick-aligned view and an offset-0 crop."""
    length, d = x.shape[-1], sizes[-1]
    pieces, slot = length // d, _slot(d)
    if pieces > 2 and not _offset_slices_open():
        parts = [x[..., p * d : (p + 1) * d] for p in range(pieces)]
        return torch.stack(parts, dim=-2).view(*sizes)
    pairs = tuple((p * d + j, p * slot + j) for p in range(pieces) for j in range(d))
    placed = padded_matmul(x, _matrix(length, pieces * slot, pairs, x))
    return placed.view(*sizes[:-1], slot)[..., :d].contiguous()


def select_columns(x: torch.Tensor, start: int, length: int) -> torch.Tensor:
    """``x[..., start:start + length]`` as a selection matmul (contiguous result)."""
    pairs = tuple((start + j, j) for j in range(length))
    return padded_matmul(x, _matrix(x.shape[-1], length, pairs, x))


def _offset_slices_open() -> bool:
    return spyre_sim.current_stack().gap_open("offset-slice")


def _offset_views_misread() -> bool:
    return (
        spyre_sim.current_stack().gap_state("offset-view-input") is spyre_sim.GapState.MISCOMPILED
    )


def _bad_pieces(x: torch.Tensor, pieces: list[tuple[int, int]], features: frozenset[str]) -> bool:
    """Whether cutting these ``(offset, length)`` pieces from the last dim breaks a rule whose
    feature is enabled."""
    if not pieces or not _floating(x):
        return False
    last = x.shape[-1]
    half = last // 2
    if (
        "sub-stick-head" in features
        and last % 2 == 0
        and len(pieces) <= 2
        and half < STICK
        and any(n == half for _, n in pieces)
    ):
        return True
    if "offset-view-input" in features and any(o for o, _ in pieces) and _offset_views_misread():
        return True
    return (
        "offset-slice" in features and any(o % STICK for o, _ in pieces) and _offset_slices_open()
    )


def _last_dim(x: torch.Tensor, dim: int) -> bool:
    return x.dim() > 0 and dim % x.dim() == x.dim() - 1


def _split_pieces(last: int, split: Any) -> list[tuple[int, int]] | None:
    if isinstance(split, int):
        if split <= 0:
            return None
        lengths = [min(split, last - o) for o in range(0, last, split)]
    elif isinstance(split, (list, tuple)) and all(isinstance(v, int) for v in split):
        lengths = [int(v) for v in split]
    else:
        return None
    if sum(lengths) != last:
        return None
    out, acc = [], 0
    for n in lengths:
        out.append((acc, n))
        acc += n
    return out


def _chunk_pieces(last: int, chunks: int) -> list[tuple[int, int]] | None:
    if chunks <= 0:
        return None
    size = -(-last // chunks)
    return _split_pieces(last, size)


def _last_dim_slice(x: torch.Tensor, index: Any) -> tuple[int, int] | None:
    """``(start, length)`` when ``x[index]`` is a step-1 slice of the last dim only."""
    if not isinstance(index, tuple):
        index = (index,)
    if not index or not isinstance(index[-1], slice):
        return None
    head = index[:-1]
    full = all(isinstance(i, slice) and i == slice(None) for i in head)
    if head != (Ellipsis,) and not (full and len(head) == x.dim() - 1):
        return None
    start, stop, step = index[-1].indices(x.shape[-1])
    if step != 1 or stop <= start or (start == 0 and stop == x.shape[-1]):
        return None
    return start, stop - start


def _inner_pick(x: torch.Tensor, index: Any) -> int | None:
    """``i`` when ``x[index]`` is ``x[..., i, :]``: one position of the second-last dim (the
    pick of Q, K or V out of a ``[..., 3, d]`` packed view), else ``None``."""
    if not isinstance(index, tuple) or len(index) < 2 or x.dim() < 2:
        return None
    *head, pick, last = index
    if isinstance(pick, bool) or not isinstance(pick, int):
        return None
    if not isinstance(last, slice) or last != slice(None):
        return None
    full = all(isinstance(i, slice) and i == slice(None) for i in head)
    if head != [Ellipsis] and not (full and len(head) == x.dim() - 2):
        return None
    n = x.shape[-2]
    if not -n <= pick < n:
        return None
    return pick + n if pick < 0 else pick


# --- the mode ----------------------------------------------------------------------------------

Handler = Callable[["StickLayout", Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
_HANDLERS: dict[Any, Handler] = {}


def _handles(*funcs: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for func in funcs:
            _HANDLERS[func] = handler
        return handler

    return register


class StickLayout(TorchFunctionMode):
    """The rewriting mode for one set of features (see the module docstring)."""

    def __init__(self, features: frozenset[str]) -> None:
        super().__init__()
        self.features = features

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is not None:
            return handler(self, func, tuple(args), kwargs)
        return func(*args, **kwargs)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


@_handles(torch.nn.functional.linear)
def _linear(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, w = args[0], _arg(args, kwargs, 1, "weight", None)
    bias = _arg(args, kwargs, 2, "bias", None)
    if "stick-align" in mode.features and _floating(x) and isinstance(w, torch.Tensor):
        k = x.shape[-1]
        if k % STICK and w.dim() == 2:
            width = stick_multiple(k)
            return func(_pad_last(x, width), _padded_weight(w, width, "last"), bias)
    return func(*args, **kwargs)


@_handles(torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm)
def _matmul(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 2 and not kwargs and "stick-align" in mode.features:
        a, b = args
        if _floating(a) and _floating(b) and _reaches_mm(a, b) and a.shape[-1] % STICK:
            return padded_matmul(a, b)
    return func(*args, **kwargs)


@_handles(torch.Tensor.__rmatmul__)
def _rmatmul(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 2 and not kwargs:
        return _matmul(mode, torch.matmul, (args[1], args[0]), {})
    return func(*args, **kwargs)


@_handles(torch.addmm, torch.Tensor.addmm)
def _addmm(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 3 and "stick-align" in mode.features:
        bias, a, b = args
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        if _floating(a) and _floating(b) and a.dim() == b.dim() == 2 and a.shape[-1] % STICK:
            width = stick_multiple(a.shape[-1])
            rest = {k: v for k, v in kwargs.items() if k not in ("beta", "alpha")}
            return func(bias, _pad_last(a, width), _padded_weight(b, width, "rows"), beta=beta,
                        alpha=alpha, **rest)  # fmt: skip
    return func(*args, **kwargs)


def _target(args: tuple[Any, ...], kwargs: dict[str, Any], at: int) -> list[int] | None:
    rest = args[at:]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple, torch.Size)):
        rest = tuple(rest[0])
    if not rest:
        shape = kwargs.get("shape", kwargs.get("size"))
        rest = tuple(shape) if shape is not None else ()
    if rest and all(isinstance(v, int) for v in rest):
        return [int(v) for v in rest]
    return None


@_handles(torch.Tensor.view, torch.Tensor.reshape)
def _view(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if "sub-stick-head" in mode.features and args and _floating(args[0]):
        target = _target(args, kwargs, 1)
        if target is not None:
            sizes = _head_split(args[0], target)
            if sizes is not None:
                return split_heads(args[0], sizes)
    return func(*args, **kwargs)


@_handles(torch.reshape)
def _reshape(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _view(mode, func, args, kwargs)


@_handles(torch.Tensor.unflatten, torch.unflatten)
def _unflatten(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0] if args else None
    dim, sizes = _arg(args, kwargs, 1, "dim", None), _arg(args, kwargs, 2, "sizes", None)
    if (
        "sub-stick-head" in mode.features
        and isinstance(x, torch.Tensor)
        and _floating(x)
        and isinstance(dim, int)
        and _last_dim(x, dim)
        and isinstance(sizes, (list, tuple))
    ):
        resolved = _head_split(x, [*x.shape[:-1], *sizes])
        if resolved is not None:
            return split_heads(x, resolved)
    return func(*args, **kwargs)


def _pieces_out(x: torch.Tensor, pieces: list[tuple[int, int]]) -> tuple[torch.Tensor, ...]:
    return tuple(select_columns(x, o, n) for o, n in pieces)


@_handles(torch.Tensor.__getitem__)
def _getitem(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, index = args[0], args[1]
    if _floating(x):
        cut = _last_dim_slice(x, index)
        if cut is not None and _bad_pieces(x, [cut], mode.features):
            return select_columns(x, *cut)
        pick = _inner_pick(x, index)
        if pick and "offset-view-input" in mode.features and _offset_views_misread():
            # x[..., i, :] of a packed [..., 3, d] view starts inside the row: select its
            # columns of the flattened rows instead (a view when x's rows are dense)
            d = x.shape[-1]
            return select_columns(x.flatten(-2), pick * d, d)
    return func(*args, **kwargs)


@functools.lru_cache(maxsize=256)
def _host_columns(width: int, start: int, length: int) -> torch.Tensor:
    mask = torch.zeros(width, dtype=torch.bool)
    mask[start : start + length] = True
    return mask


def assign_columns(x: torch.Tensor, start: int, length: int, value: Any) -> None:
    """``x[..., start:start + length] = value`` written without cutting the stick dim: a
    column mask selects, in one ``where``, the new values (placed into their columns by a
    placement matmul when ``value`` is a tensor) or the old ones, and ``x`` is overwritten."""
    mask = _host_columns(x.shape[-1], start, length).to(x.device)
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[-1] == length:
        pairs = tuple((j, start + j) for j in range(length))
        placed = padded_matmul(value.to(x.dtype), _matrix(length, x.shape[-1], pairs, x))
        value = placed
    x.copy_(torch.where(mask, value, x))


@_handles(torch.Tensor.__setitem__)
def _setitem(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, index = args[0], args[1]
    if _floating(x) and len(args) == 3:
        cut = _last_dim_slice(x, index)
        if cut is not None and _bad_pieces(x, [cut], mode.features):
            assign_columns(x, *cut, args[2])
            return None
    return func(*args, **kwargs)


@_handles(torch.Tensor.narrow, torch.narrow)
def _narrow(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    dim, start = _arg(args, kwargs, 1, "dim", 0), _arg(args, kwargs, 2, "start", 0)
    length = _arg(args, kwargs, 3, "length", None)
    ints = isinstance(dim, int) and isinstance(start, int) and isinstance(length, int)
    if _floating(x) and ints and _last_dim(x, dim):
        start = start + x.shape[-1] if start < 0 else start
        if _bad_pieces(x, [(start, length)], mode.features):
            return select_columns(x, start, length)
    return func(*args, **kwargs)


@_handles(torch.Tensor.split, torch.split)
def _split(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    size = _arg(args, kwargs, 1, "split_size_or_sections", kwargs.get("split_size"))
    dim = _arg(args, kwargs, 2, "dim", 0)
    if _floating(x) and isinstance(dim, int) and _last_dim(x, dim):
        pieces = _split_pieces(x.shape[-1], size)
        if pieces is not None and _bad_pieces(x, pieces, mode.features):
            return _pieces_out(x, pieces)
    return func(*args, **kwargs)


@_handles(torch.Tensor.chunk, torch.chunk)
def _chunk(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    chunks, dim = _arg(args, kwargs, 1, "chunks", None), _arg(args, kwargs, 2, "dim", 0)
    if _floating(x) and isinstance(dim, int) and isinstance(chunks, int) and _last_dim(x, dim):
        pieces = _chunk_pieces(x.shape[-1], chunks)
        if pieces is not None and _bad_pieces(x, pieces, mode.features):
            return _pieces_out(x, pieces)
    return func(*args, **kwargs)


@_handles(torch.Tensor.unbind, torch.unbind)
def _unbind(mode: StickLayout, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim", 0)
    if _floating(x) and isinstance(dim, int) and _last_dim(x, dim) and x.shape[-1] > 1:
        pieces = [(i, 1) for i in range(x.shape[-1])]
        if _bad_pieces(x, pieces, mode.features):
            return tuple(p.squeeze(-1) for p in _pieces_out(x, pieces))
    return func(*args, **kwargs)


# --- entering the mode -----------------------------------------------------------------------

KIND = "stick-layout"


def _factory(features: frozenset[str]) -> StickLayout:
    return StickLayout(features)


register_kind(KIND, _factory)
