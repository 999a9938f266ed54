"""Miscompile reproductions of attention and of views read from the wrong memory:
``sdpa-strided``, ``sdpa-seq-align``, ``offset-view-input`` (a copy and an attention) and
``decode-query-layout``.

Registered in this order for ``scaled_dot_product_attention`` (the first that applies decides).
What each returns is described in :mod:`spyre_sim.miscompile`; sources for each are in
``spyre_sim/data/gaps.toml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spyre_sim._miscompile_registry import host_of as _host
from spyre_sim._miscompile_registry import register
from spyre_sim._rows import offset_in_row


def _strided_read(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 3 or x.is_contiguous():
        return x
    *lead, h, n, d = x.shape
    return x.contiguous().reshape(*lead, n, h, d).transpose(-3, -2)


@register("sdpa-strided", "aten.scaled_dot_product_attention")
def sdpa_strided_read(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """Non-contiguous q/k/v are read with heads and positions mixed (see module doc)."""
    q, k, v = (_host(t) for t in args[:3])
    if q.is_contiguous() and k.is_contiguous() and v.is_contiguous():
        return None
    rest = [_host(a) for a in args[3:]]
    host_kwargs = {name: _host(value) for name, value in kwargs.items()}
    return torch.ops.aten.scaled_dot_product_attention.default(
        _strided_read(q), _strided_read(k), _strided_read(v), *rest, **host_kwargs
    )


def _sdpa_operands(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    hosts = [_host(a) for a in args]
    return hosts, {name: _host(value) for name, value in kwargs.items()}


def _sdpa(hosts: Sequence[Any], host_kwargs: dict[str, Any]) -> Any:
    return torch.ops.aten.scaled_dot_product_attention.default(*hosts, **host_kwargs)


SDPA_STICK = 64
"""Keys per stick of the score matmul (fp16): the alignment SDPA's key length needs."""


@register("sdpa-seq-align", "aten.scaled_dot_product_attention")
def sdpa_partial_key_stick(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A key length of more than one stick whose last stick is partial: the keys in that
    partial stick score zero before the mask and the softmax."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    if len(hosts) < 3 or not all(isinstance(t, torch.Tensor) for t in hosts[:3]):
        return None
    k = hosts[1]
    length = k.shape[-2] if k.dim() >= 2 else 0
    if length <= SDPA_STICK or length % SDPA_STICK == 0:
        return None
    blanked = k.clone()
    blanked[..., length - length % SDPA_STICK :, :] = 0
    hosts[1] = blanked
    return _sdpa(hosts, host_kwargs)


def _packed_read(x: Any) -> torch.Tensor | None:
    """``x`` read from the start of its row of the buffer it was cut from, when ``x`` is a view
    that starts inside a row (the packed-QKV pattern: K and V start inside the row that holds
    Q, K and V); ``None`` otherwise."""
    if not isinstance(x, torch.Tensor):
        return None
    within = offset_in_row(x)
    if within == 0:
        return None
    return torch.as_strided(x, x.size(), x.stride(), x.storage_offset() - within)


@register("offset-view-input", "aten.clone")
def offset_view_clone(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """A copy of a view starting inside a row of its buffer copies from the buffer's start."""
    moved = _packed_read(_host(args[0])) if args else None
    if moved is None:
        return None
    memory_format = kwargs.get("memory_format") or torch.preserve_format
    return moved.clone(memory_format=memory_format)


@register("offset-view-input", "aten.scaled_dot_product_attention")
def offset_view_sdpa(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """q, k or v views starting inside a row of a packed buffer are read from its start:
    packed QKV reads Q's slice for K and V."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    moved = [_packed_read(t) for t in hosts[:3]]
    if all(m is None for m in moved):
        return None
    for i, m in enumerate(moved):
        if m is not None:
            hosts[i] = m
    return _sdpa(hosts, host_kwargs)


@register("decode-query-layout", "aten.scaled_dot_product_attention")
def decode_query_heads(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
    """One query position whose heads sit inside the stick row (the ``[B, 1, H, D]`` buffer
    viewed as ``[B, H, 1, D]``) is read heads-outer: the query heads come in reverse order."""
    hosts, host_kwargs = _sdpa_operands(args, kwargs)
    q = hosts[0] if hosts else None
    if not isinstance(q, torch.Tensor) or q.dim() != 4 or q.shape[-2] != 1:
        return None
    heads, width = q.shape[-3], q.shape[-1]
    if heads < 2 or q.stride(-2) == width:
        return None
    hosts[0] = q.flip(-3)
    return _sdpa(hosts, host_kwargs)
