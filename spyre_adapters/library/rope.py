"""RoPE from host-precomputed tables, applied by multiply-and-sum (gaps ``sin-cos``, ``rotate-half``,
and ``offset-slice`` for partial rotary).

Matches every model that has a standard Transformers rotary embedding module (a module with an
``inv_freq`` buffer, or per-layer-type ``<type>_inv_freq`` buffers, called as
``rotary_emb(x, position_ids, ...)`` and returning ``(cos, sin)``) and modules whose forward calls
their modeling module's ``apply_rotary_pos_emb``. Llama, Mistral, Qwen2/3, Gemma 1-3, Phi,
Phi-3, GPT-NeoX, Granite, OLMo, StableLM, Cohere, GLM, Helium, ... all have that shape.

What changes:

- the rotary embedding module becomes :class:`HostRotaryEmbedding`: the stock module's own
  ``(cos, sin)`` for positions ``0..L-1`` are computed once on the host at prepare time (so
  every RoPE scaling the stock module knows is honoured), laid out as the family's function
  reads them and padded to the full head dim with cos = 1 / sin = 0 (identity padding for
  partial rotary); each forward only looks rows up on the host and ships them to the input's
  device: no ``sin``/``cos`` on the device;
- each module calling ``apply_rotary_pos_emb`` gets a per-instance forward whose copy of the
  modeling module's globals holds a slice-free rotation ``q * cos + (q @ P) * sin``. ``P`` (the
  signed permutation ``rotate_half`` or an interleaved variant performs) and the table layout
  (identity, or GLM's and Helium's ``repeat_interleave`` of the first half) are *measured* from
  the family's own function at prepare time, and the whole form is checked against that
  function on random inputs, so a family with another rotation is declined, never silently
  changed. No module-level global is touched.

Partial rotary needs no cut either: tables and ``P`` are identity-padded to the whole head, and
where the attention body itself cuts ``q[..., :r]`` / ``q[..., r:]`` and concatenates them back
(Phi, StableLM, Persimmon), a ``TorchFunctionMode`` scoped to that forward hands the whole head
through both cuts and returns the rotated head for the concatenation.

``P`` holds only -1/0/+1, so ``q @ P`` is exact and the result equals the stock formula in fp32.
Rotary types that recompute frequencies per sequence length (``dynamic``, ``longrope``) are
declined: a table computed once cannot follow them.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import (
    forward_function,
    functions_calling,
    rebind_globals,
)

__all__ = ["HostRotaryEmbedding", "RopeRotation", "adapter", "rotation_function", "rotations_of"]

_APPLY_NAME = "apply_rotary_pos_emb"
_STATIC_ROPE_TYPES = frozenset({"default", "linear", "llama3", "yarn"})
_FIRST_TABLE_LENGTH = 4096
_MARK = "_spyre_host_rotation"


def _inv_freq_names(module: nn.Module) -> list[str]:
    return [
        name
        for name, value in module.__dict__.get("_buffers", {}).items()
        if value is not None
        and (name == "inv_freq" or name.endswith("_inv_freq"))
        and "original_" not in name
        and "long_" not in name
    ]


def _is_stock_rotary(module: nn.Module) -> bool:
    if isinstance(module, HostRotaryEmbedding) or not _inv_freq_names(module):
        return False
    try:
        params = list(inspect.signature(type(module).forward).parameters)
    except (TypeError, ValueError):
        return False
    return params[1:3] == ["x", "position_ids"]


def _rope_types(module: nn.Module) -> set[str]:
    rope_type = getattr(module, "rope_type", "default")
    if isinstance(rope_type, dict):
        return {str(v) for v in rope_type.values()}
    return {str(rope_type)}


def _layer_types(module: nn.Module) -> list[tuple[object, ...]]:
    """The extra positional arguments the rotary module is called with (one per layer type)."""
    names = [n for n in _inv_freq_names(module) if n != "inv_freq"]
    return [(name[: -len("_inv_freq")],) for name in names] or [()]


def _head_dim(module: nn.Module, config: object) -> int | None:
    for name in ("head_dim", "head_size"):
        value = getattr(module, name, None)
        if isinstance(value, int):
            return value
    value = getattr(config, "head_dim", None)
    if isinstance(value, int):
        return value
    hidden = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and heads:
        return hidden // heads
    return None


class HostRotaryEmbedding(nn.Module):
    """A rotary embedding that looks ``(cos, sin)`` up in host tables built from the stock module.

    The tables are plain (unregistered) CPU tensors: they stay on the host when the model moves,
    and the state dict is unchanged. Rows beyond the table are computed on the host on demand.
    """

    def __init__(
        self, stock: nn.Module, head_dim: int, length: int, layout: Layout | None = None
    ) -> None:
        super().__init__()
        # how the consumers read the tables: ``cos @ L + c`` / ``sin @ L`` (see _measure_rotation)
        self.layout = layout
        # a private CPU copy: the original goes back into the model on rollback, untouched
        self._stock: tuple[nn.Module, ...] = (copy.deepcopy(stock).to("cpu"),)
        self.head_dim = head_dim
        # where each of the ``head_dim`` stock columns sits in a wider (padded) head, if any
        self.placement: tuple[int, ...] | None = None
        self._tables: dict[tuple[object, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        for key in _layer_types(stock):
            self._tables[key] = self._build(key, length)

    def place(
        self, table: tuple[torch.Tensor, torch.Tensor], width: int, placement: tuple[int, ...]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` columns moved to ``placement`` in a ``width``-wide head; the new
        columns get cos = 1 and sin = 0 (they only ever meet zero activations)."""
        cos, sin = table
        index = torch.tensor(placement)
        wide_cos = torch.ones(cos.shape[0], width)
        wide_sin = torch.zeros(sin.shape[0], width)
        wide_cos[:, index] = cos
        wide_sin[:, index] = sin
        return wide_cos, wide_sin

    def __getattr__(self, name: str) -> Any:
        # plain attributes callers read off the rotary module (``config``, ``rope_type``,
        # ``attention_scaling``...) come from the stock copy
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_"):
                raise
            stock = self.__dict__.get("_stock")
            if stock is None:
                raise
            return getattr(stock[0], name)

    def _build(self, key: tuple[object, ...], length: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(length, dtype=torch.long)[None]
        cos, sin = self._host_tables(positions, key)
        return cos[0].contiguous(), sin[0].contiguous()

    def _host_tables(
        self, positions: torch.Tensor, key: tuple[object, ...]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The stock module's ``(cos, sin)`` for ``positions``, computed on the host in fp32 and
        laid out (and placed) for the adapted heads."""
        stock = self._stock[0]
        probe = torch.zeros(1, dtype=torch.float32)
        with torch.no_grad():
            cos, sin = stock(probe, positions, *key)
        cos, sin = cos.float(), sin.float()
        rotary = cos.shape[-1]
        source = len(self.placement) if self.placement is not None else self.head_dim
        if rotary > source:
            raise ValueError(
                f"rotary tables are {rotary} wide but the attention head dim is {source}; "
                "adapter `rope-rotation` pads tables up to the head dim and cannot shrink them"
            )
        layout, offset = self.layout or identity_layout(rotary, source)
        if layout.shape[0] != rotary:
            raise ValueError(
                f"{type(stock).__name__} returned rotary tables {rotary} wide for position ids "
                f"of shape {tuple(positions.shape)}, but adapter `rope-rotation` measured "
                f"{layout.shape[0]}-wide tables for this model; this module does not support "
                "such position ids (multimodal [3, batch, seq] ids need an M-RoPE rotary module)"
            )
        # a 0/1 selection matrix: every output column is one table column, exactly
        cos = cos @ layout + offset
        sin = sin @ layout
        if self.placement is not None:
            lead = cos.shape[:-1]
            flat = (cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1]))
            cos, sin = self.place(flat, self.head_dim, self.placement)
            cos, sin = cos.reshape(*lead, -1), sin.reshape(*lead, -1)
        return cos, sin

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key = (*args, *(kwargs[k] for k in sorted(kwargs)))
        positions = position_ids.cpu()  # host-side lookup: one transfer off a device
        if positions.dim() != 2:
            # multimodal position ids ([3, batch, seq]): the stock module merges them; let it,
            # on the host, rather than guess its merge from a 1-D table
            cos, sin = self._host_tables(positions, key)
            return (
                cos.to(dtype=x.dtype).to(device=x.device),
                sin.to(dtype=x.dtype).to(device=x.device),
            )
        table = self._tables.get(key)
        needed = int(positions.max()) + 1 if positions.numel() else 0
        if table is None or needed > table[0].shape[0]:
            length = max(_FIRST_TABLE_LENGTH, 1 << max(needed - 1, 1).bit_length())
            table = self._tables[key] = self._build(key, length)
        cos = table[0][positions].to(dtype=x.dtype)
        sin = table[1][positions].to(dtype=x.dtype)
        return cos.to(device=x.device), sin.to(device=x.device)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, host tables={sorted(map(str, self._tables))}"


Layout = tuple[torch.Tensor, torch.Tensor]  # (L [rotary, width], c [width])


def identity_layout(rotary: int, width: int) -> Layout:
    """The layout of the standard functions: tables used as they are, identity-padded."""
    layout = torch.zeros(rotary, width)
    layout[:, :rotary] = torch.eye(rotary)
    offset = torch.zeros(width)
    offset[rotary:] = 1.0
    return layout, offset


def _measure_rotation(
    apply_fn: Callable[..., Any], width: int, rotary: int
) -> tuple[Layout, torch.Tensor]:
    """Measure ``apply_fn`` as ``q * (cos @ L + c) + (q @ P) * (sin @ L)`` for ``width``-wide
    heads and ``rotary``-wide tables, then verify that form on random inputs.

    ``L`` is how the function lays its tables out (the identity for the usual half-split
    functions, a ``repeat_interleave`` of the first half for GLM and Helium), ``c`` the 1s of
    the pass-through columns, and ``P`` the signed permutation of ``rotate_half``. Returns
    ``((L, c), P)``; raises ValueError if the function is not of that form."""
    ones = torch.ones(1, 1, rotary, width)
    zeros = torch.zeros(1, rotary, rotary)
    with torch.no_grad():
        offset, _ = apply_fn(ones[..., :1, :], ones[..., :1, :].clone(), zeros[:, :1], zeros[:, :1])
        offset = torch.as_tensor(offset).reshape(width)
        unit = torch.eye(rotary).view(1, rotary, rotary)  # position j carries cos = e_j
        columns, _ = apply_fn(ones, ones.clone(), unit, zeros)
    layout = torch.as_tensor(columns).reshape(rotary, width) - offset
    turning = torch.ones(rotary) @ layout  # 1 on the columns the rotation acts on
    if not bool(((turning == 0) | (turning == 1)).all()):
        raise ValueError(f"{_APPLY_NAME} lays its tables out in a way this adapter cannot")
    eye = torch.eye(width).view(1, 1, width, width)
    with torch.no_grad():
        rows, _ = apply_fn(
            eye, eye.clone(), torch.zeros(1, width, rotary), torch.ones(1, width, rotary)
        )
    rotation: torch.Tensor = torch.as_tensor(rows).reshape(width, width).clone() * turning
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, width, generator=gen)
    k = torch.randn(2, 1, 5, width, generator=gen)
    cos = torch.randn(2, 5, rotary, generator=gen)
    sin = torch.randn(2, 5, rotary, generator=gen)
    with torch.no_grad():
        q_ref, k_ref = apply_fn(q, k, cos, sin)
    cos_l = (cos @ layout + offset)[:, None]
    sin_l = (sin @ layout)[:, None]
    for x, ref in ((q, q_ref), (k, k_ref)):
        ours = x * cos_l + (x @ rotation) * sin_l
        if ours.shape != ref.shape or not torch.allclose(ours, ref, atol=1e-5, rtol=1e-5):
            raise ValueError(f"{_APPLY_NAME} is not a rotate-half style rotation")
    return (layout, offset), rotation


def rotation_function(
    rotations: dict[int, torch.Tensor],
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A drop-in ``apply_rotary_pos_emb`` using the measured ``rotations`` (by input width).

    Families that slice the rotary part off in the attention body (Phi, StableLM, Persimmon)
    call it with narrower inputs than the head-dim tables: the tables are then cut at offset 0,
    which stays inside the stick (only non-zero offsets are a gap).
    """
    cache: dict[tuple[int, torch.device, torch.dtype], torch.Tensor] = {}

    def apply_rotary_pos_emb(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        unsqueeze_dim = kwargs.get(
            "unsqueeze_dim", args[-1] if args and isinstance(args[-1], int) else 1
        )
        width = q.shape[-1]
        if width not in rotations or cos.shape[-1] < width:
            raise ValueError(
                f"rope-rotation: heads are {width} wide (measured widths: {sorted(rotations)}) "
                f"and cos/sin {cos.shape[-1]}; this attention is fed by a rotary module the "
                "adapter did not replace. Remedy: restore the model and report the family so "
                "the adapter declines it."
            )
        slot = (width, q.device, q.dtype)
        matrix = cache.get(slot)
        if matrix is None:
            matrix = cache[slot] = rotations[width].to(device=q.device, dtype=q.dtype)
        if cos.shape[-1] != width:
            cos, sin = cos[..., :width], sin[..., :width]
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = q * cos + torch.matmul(q, matrix) * sin
        k_embed = k * cos + torch.matmul(k, matrix) * sin
        return q_embed, k_embed

    setattr(apply_rotary_pos_emb, _MARK, rotations)
    return apply_rotary_pos_emb


def rotations_of(function: object) -> dict[int, torch.Tensor] | None:
    """The rotation matrices (by head width) of a function made by :func:`rotation_function`,
    or None for any other function (a stock ``apply_rotary_pos_emb``)."""
    rotations = getattr(function, _MARK, None)
    return rotations if isinstance(rotations, dict) else None


class _Plan:
    """What ``apply`` will do, computed by ``matches`` without touching the model."""

    def __init__(self) -> None:
        self.rotary: list[str] = []
        self.consumers: list[tuple[str, types.FunctionType, dict[str, Any]]] = []
        self.rotations: dict[int, dict[int, torch.Tensor]] = {}
        self.layouts: list[Layout] = []  # how the head-dim functions lay their tables out
        self.head_dim = 0


def _plan(model: nn.Module) -> _Plan | None:
    plan = _Plan()
    config = getattr(model, "config", None)
    rotary_dims: set[int] = set()
    for path, module in model.named_modules():
        if not _is_stock_rotary(module):
            continue
        if not _rope_types(module) <= _STATIC_ROPE_TYPES:
            return None
        names = _inv_freq_names(module)
        rotary_dims.update(2 * int(module._buffers[n].shape[-1]) for n in names)
        plan.rotary.append(path)
    if not plan.rotary or len(rotary_dims) != 1:
        return None
    rotary = rotary_dims.pop()
    head_dims: set[int] = set()
    for path, module in model.named_modules():
        fn = forward_function(module)
        if fn is None:
            continue
        callers = functions_calling(fn, _APPLY_NAME)
        if not callers:
            continue
        owner = callers[0].__globals__
        if rotations_of(owner[_APPLY_NAME]) is not None:
            continue  # already adapted
        head_dim = _head_dim(module, config)
        if head_dim is None:
            return None
        head_dims.add(head_dim)
        plan.consumers.append((path, fn, owner))
    if not plan.consumers or len(head_dims) != 1:
        return None
    plan.head_dim = head_dims.pop()
    if rotary > plan.head_dim or rotary % 2:
        return None
    for path, _, owner in plan.consumers:
        measured = plan.rotations.setdefault(id(owner), {})
        widths = {plan.head_dim}
        narrowed = getattr(model.get_submodule(path), "rotary_ndims", None)
        if isinstance(narrowed, int) and rotary <= narrowed < plan.head_dim:
            widths.add(narrowed)  # the attention body slices the rotary part off itself
        for width in widths - set(measured):
            try:
                layout, measured[width] = _measure_rotation(owner[_APPLY_NAME], width, rotary)
            except Exception:  # the probe failing in any way means: not the standard form
                continue
            if width == plan.head_dim:
                plan.layouts.append(layout)
        if not measured:
            return None
        if isinstance(narrowed, int) and narrowed in measured and plan.head_dim not in measured:
            # the whole head through the same rotation: identity on the pass-through columns
            whole = torch.zeros(plan.head_dim, plan.head_dim)
            whole[:narrowed, :narrowed] = measured[narrowed]
            measured[plan.head_dim] = whole
    first = plan.layouts[0] if plan.layouts else identity_layout(rotary, plan.head_dim)
    if any(not (torch.equal(a, first[0]) and torch.equal(b, first[1])) for a, b in plan.layouts):
        return None  # two functions wanting the same tables laid out differently
    plan.layouts = [first]
    return plan


class _WholeHeadRotaryMode(TorchFunctionMode):
    """Scoped to one attention forward whose body cuts ``q[..., :r]`` / ``q[..., r:]``, rotates
    the first part and concatenates them again (Phi, StableLM, Persimmon).

    Both cuts return the whole head instead (no slicing at offset ``r`` inside the stick), the
    rotation then runs on the whole head with identity-padded tables (the pass-through columns
    have cos = 1, sin = 0), and the concatenation of a rotated whole head with the "pass" cut
    of the same width returns the rotated head. Anything else passes through untouched.
    """

    def __init__(self, rotary: int, head_dim: int) -> None:
        super().__init__()
        self.rotary = rotary
        self.head_dim = head_dim
        self.passes: list[torch.Tensor] = []  # the "pass" cuts handed out (kept alive for `is`)

    def _cut(self, key: object) -> str | None:
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] is Ellipsis):
            return None
        cut = key[1]
        if not isinstance(cut, slice) or cut.step not in (None, 1):
            return None
        if cut.start is None and cut.stop == self.rotary:
            return "rot"
        if cut.start == self.rotary and cut.stop is None:
            return "pass"
        return None

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and len(args) == 2:
            source = args[0]
            if isinstance(source, torch.Tensor) and source.shape[-1] == self.head_dim:
                cut = self._cut(args[1])
                if cut == "rot":
                    return source
                if cut == "pass":
                    self.passes.append(source)
                    return source
        if func is torch.cat and args and isinstance(args[0], (tuple, list)) and len(args[0]) == 2:
            first, second = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            if (
                dim in (-1, getattr(first, "ndim", 0) - 1)
                and any(second is p for p in self.passes)
                and isinstance(first, torch.Tensor)
                and first.shape == second.shape
            ):
                return first
        return func(*args, **kwargs)


def _whole_head(clone: types.FunctionType, rotary: int, head_dim: int) -> Callable[..., Any]:
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        with _WholeHeadRotaryMode(rotary, head_dim):
            return clone(self, *args, **kwargs)

    return forward


class RopeRotation:
    """The ``rope-rotation`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return _plan(model) is not None

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        plan = _plan(model)
        if plan is None:
            raise ValueError(
                f"rope-rotation does not apply to {type(model).__name__}: no standard rotary "
                "embedding with static frequencies feeding `apply_rotary_pos_emb`"
            )
        config = getattr(model, "config", None)
        max_positions = getattr(config, "max_position_embeddings", None)
        length = min(max_positions, _FIRST_TABLE_LENGTH) if isinstance(max_positions, int) else 2048
        for path in plan.rotary:
            stock = model.get_submodule(path)
            rotary = HostRotaryEmbedding(stock, plan.head_dim, max(length, 1), plan.layouts[0])
            edit.replace_module(path, rotary)
        functions = {key: rotation_function(rot) for key, rot in plan.rotations.items()}
        for path, fn, owner in plan.consumers:
            module = model.get_submodule(path)
            clone = rebind_globals(fn, owner, {_APPLY_NAME: functions[id(owner)]})
            narrowed = getattr(module, "rotary_ndims", None)
            if isinstance(narrowed, int) and narrowed < plan.head_dim:
                edit.bind_forward(module, _whole_head(clone, narrowed, plan.head_dim))
            else:
                edit.bind_forward(module, clone)


adapter = RopeRotation()
