"""Attention heads zero-padded to full sticks, exactly (gap ``sub-stick-head``).

RoPE as a matmul on the device needs each rotary half of a head to fill a stick
(``head_dim / 2 >= 64``); smaller heads fail with ``Could not find a host dimension matching
stick expr``. This adapter pads every head to 128 columns:

- Q and K rows are placed per rotary half: columns ``[0, d/2)`` stay, columns ``[d/2, d)``
  move to ``[64, 64 + d/2)``; the rest are zero rows. ``q . k`` is unchanged (zeros add
  nothing) and the rotation pairs stay pairs;
- V rows are end-padded per head and ``o_proj`` gets zero columns in the same places, so the
  padded part of each head's output is zero and is multiplied by zero;
- the attention keeps its ``scaling`` (computed from the true head dim at construction), and
  only ``head_dim`` (the view size) changes.

It runs after ``rope-rotation`` and builds on it: the host rotary tables and the measured
rotation ``P`` are re-laid out for the padded head (``P' = E^T P E`` for the placement ``E``),
so RoPE still needs no slicing. Matched structurally: a :class:`~spyre_adapters.library.rope.
HostRotaryEmbedding` narrower than 128 and attention modules with plain ``q_proj``/``k_proj``/
``v_proj``/``o_proj`` ``Linear`` layers, the same ``head_dim`` and a rope-rotation forward.
Attention with per-head norms (Qwen3, OLMo-2, Gemma 3 ``q_norm``) or a body-side partial rotary
(Phi's ``rotary_ndims``) is declined: padding would change what those compute.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import (
    forward_function,
    functions_calling,
    rebind_globals,
)
from spyre_adapters.library.rope import HostRotaryEmbedding, rotation_function, rotations_of

__all__ = ["HeadPadding", "adapter", "half_placement"]

_STICK = 64
_TARGET = 2 * _STICK
_APPLY_NAME = "apply_rotary_pos_emb"
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")


def half_placement(head_dim: int, width: int = _TARGET) -> tuple[int, ...]:
    """Where column ``i`` of a ``head_dim`` head goes in a ``width`` head: each rotary half
    starts its own half of the padded head."""
    half = head_dim // 2
    return tuple(i if i < half else width // 2 + (i - half) for i in range(head_dim))


def _rows(
    weight: torch.Tensor, heads: int, head_dim: int, placement: tuple[int, ...], width: int
) -> torch.Tensor:
    """Per-head rows of ``weight`` [heads*head_dim, ...] moved into a [heads*width, ...] matrix."""
    out = weight.new_zeros((heads * width, *weight.shape[1:]))
    index = torch.tensor(placement)
    for head in range(heads):
        out[head * width + index] = weight[head * head_dim : (head + 1) * head_dim]
    return out


def _linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    layer = nn.Linear(
        weight.shape[1], weight.shape[0], bias=bias is not None, device="meta", dtype=weight.dtype
    )
    layer.weight = nn.Parameter(weight.contiguous())
    if bias is not None:
        layer.bias = nn.Parameter(bias.contiguous())
    return layer


def _proj(module: nn.Module, name: str) -> nn.Linear:
    layer = getattr(module, name)
    assert isinstance(layer, nn.Linear)
    return layer


def _padded(layer: nn.Linear, heads: int, head_dim: int, placement: tuple[int, ...]) -> nn.Linear:
    """``layer`` with its per-head output rows moved to ``placement`` in 128-wide heads."""
    weight = _rows(layer.weight.detach(), heads, head_dim, placement, _TARGET)
    bias = layer.bias
    return _linear(
        weight,
        None if bias is None else _rows(bias.detach(), heads, head_dim, placement, _TARGET),
    )


def _attention(module: nn.Module, head_dim: int) -> dict[str, Any] | None:
    """The rope-rotation forward pieces of a paddable attention module, else None."""
    projections = [getattr(module, name, None) for name in _PROJECTIONS]
    if not all(type(p) is nn.Linear for p in projections):
        return None
    if getattr(module, "head_dim", None) != head_dim or hasattr(module, "rotary_ndims"):
        return None
    extra = [n for n, _ in module.named_children() if n not in _PROJECTIONS]
    if any(not isinstance(getattr(module, n), nn.Dropout) for n in extra):
        return None  # per-head norms or anything else that would see the padding
    fn = forward_function(module)
    if fn is None:
        return None
    callers = functions_calling(fn, _APPLY_NAME)
    if not callers:
        return None
    owner = callers[0].__globals__
    rotations = rotations_of(owner[_APPLY_NAME])
    if rotations is None or head_dim not in rotations:
        return None
    q_out = _proj(module, "q_proj").weight.shape[0]
    k_out = _proj(module, "k_proj").weight.shape[0]
    if q_out % head_dim or k_out % head_dim or _proj(module, "o_proj").weight.shape[1] != q_out:
        return None
    return {"fn": fn, "owner": owner, "rotations": rotations}


def _plan(model: nn.Module) -> tuple[list[str], list[tuple[str, dict[str, Any]]], int] | None:
    rotary = [(p, m) for p, m in model.named_modules() if isinstance(m, HostRotaryEmbedding)]
    widths = {m.head_dim for _, m in rotary}
    if not rotary or len(widths) != 1:
        return None
    head_dim = widths.pop()
    if head_dim >= _TARGET or head_dim % 2 or any(m.placement is not None for _, m in rotary):
        return None
    attention: list[tuple[str, dict[str, Any]]] = []
    for path, module in model.named_modules():
        fn = forward_function(module)
        if fn is not None and functions_calling(fn, _APPLY_NAME):
            found = _attention(module, head_dim)
            if found is None:
                return None  # one unpaddable consumer of the tables: decline the whole model
            attention.append((path, found))
    if not attention:
        return None
    return [p for p, _ in rotary], attention, head_dim


class HeadPadding:
    """The ``head-padding`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return _plan(model) is not None

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        plan = _plan(model)
        if plan is None:
            raise ValueError(
                f"head-padding does not apply to {type(model).__name__}: it needs rope-rotation "
                f"applied first, heads narrower than {_TARGET} and plain q/k/v/o Linear attention"
            )
        rotary_paths, attention, head_dim = plan
        placement = half_placement(head_dim)
        ends = tuple(range(head_dim))  # V/O: end padding
        embed = torch.zeros(head_dim, _TARGET)
        embed[torch.arange(head_dim), torch.tensor(placement)] = 1.0
        for path in rotary_paths:
            rotary = model.get_submodule(path)
            assert isinstance(rotary, HostRotaryEmbedding)
            tables = {k: rotary.place(t, _TARGET, placement) for k, t in rotary._tables.items()}
            edit.set_attr(rotary, "_tables", tables)
            edit.set_attr(rotary, "placement", placement)
            edit.set_attr(rotary, "head_dim", _TARGET)
        functions: dict[int, Any] = {}
        for path, found in attention:
            module = model.get_submodule(path)
            q, k, v, o = (_proj(module, name) for name in _PROJECTIONS)
            heads = q.weight.shape[0] // head_dim
            kv_heads = k.weight.shape[0] // head_dim
            with torch.no_grad():
                new_q = _padded(q, heads, head_dim, placement)
                new_k = _padded(k, kv_heads, head_dim, placement)
                new_v = _padded(v, kv_heads, head_dim, ends)
                o_weight = _rows(o.weight.detach().t(), heads, head_dim, ends, _TARGET).t()
                new_o = _linear(o_weight, None if o.bias is None else o.bias.detach().clone())
            for name, layer in zip(_PROJECTIONS, (new_q, new_k, new_v, new_o), strict=True):
                edit.replace_module(f"{path}.{name}", layer)
            edit.set_attr(module, "head_dim", _TARGET)
            owner = found["owner"]
            if id(owner) not in functions:
                rotations = dict(found["rotations"])
                rotations[_TARGET] = embed.t() @ rotations[head_dim] @ embed
                functions[id(owner)] = rotation_function(rotations)
            edit.bind_forward(
                module, rebind_globals(found["fn"], owner, {_APPLY_NAME: functions[id(owner)]})
            )


adapter = HeadPadding()
