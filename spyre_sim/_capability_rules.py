"""The capability rules of the device (``SpyreLoweringError``; always on): ``bf16``,
``dtype-cast``, ``sdpa-gqa``, ``moe-topk`` and ``topk-split`` (top-k's k), ``pow-exponent`` and
``pow-int-base`` (pow's exponent and base), ``bool-index``.

Each is registered with :func:`~spyre_sim._layout_registry.layout_rule` (``layout=False``);
:func:`topk_split` is the core split of top-k that ``topk-split`` checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from spyre_sim._layout_registry import CORE_COUNT, layout_rule
from spyre_sim._layout_registry import shape_of as _shape
from spyre_sim._layout_registry import tensors_in as _tensors


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
