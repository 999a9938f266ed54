"""The chunked gated delta rule with its triangular solve in whole rows (gap ``sub-stick-head``).

Gated DeltaNet layers (Qwen3-Next, Qwen3.5, Qwen3.5-MoE, OLMo-Hybrid) call a module-level
function of their modeling module, ``torch_chunk_gated_delta_rule``, that splits the sequence
into chunks of 64 positions and, inside each chunk, solves the unit lower-triangular system of
the WY representation by forward substitution. Transformers 5.15 writes that solve as

    for i in range(1, 64):
        row = attn[..., i, :i]; sub = attn[..., :i, :i]
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)

which cuts the chunk's last dim, one stick of 64 elements, into a prefix of ``i`` elements at
every step; the release refuses the half cut ``[0:32]`` (``sub-stick-head``, lasting: this
adapter is permanent), and no other adapter rewrites it.

Matched structurally: every module whose forward (decorators included) calls the module-level
function :data:`NAME`, where that function solves by substitution. Later Transformers versions
(5.25) call ``torch.linalg.solve_triangular`` there instead, an op the generated
``bridge-linalg-solve-triangular`` computes; such a function (it names ``solve_triangular``) is
left to the bridge. Each matched module gets a per-instance forward whose copy of the modeling module's
globals holds :func:`chunk_gated_delta_rule` under that name (the function, the class and the
other models of the family are untouched). It computes the same quantities in the same order
of operations, with one difference of expression: the solve reads and writes whole rows. Row
``i`` of the strictly lower-triangular system is zero from column ``i`` on, and so is every
product it forms with the rows above it, so ``row + (row.unsqueeze(-1) * attn).sum(-2)`` over
all 64 columns equals the stock prefix update on the prefix and is zero beyond it: the terms
the stock computation leaves out are exact zeros. Grouped value heads (fewer query/key heads
than value heads, which later Transformers versions expand inside the function) are expanded
the same way, so the function means the same for every version that names it.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import (
    forward_function,
    functions_calling,
    rebind_globals,
)
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["NAME", "DeltaRuleRows", "adapter", "chunk_gated_delta_rule", "solve_in_rows"]

#: The module-level function of the modeling modules this adapter replaces per instance.
NAME = "torch_chunk_gated_delta_rule"


def _l2_normalized(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _functions_behind(obj: Any, depth: int = 4) -> list[types.FunctionType]:
    """The Python functions a callable runs: itself under its decorators, the functions in its
    closure cells, and the ``forward`` of a module that wraps one (Transformers 5.25 holds the
    kernel-hub fallback as a module), ``depth`` levels deep."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        found = [obj]
        if depth > 0:
            for cell in obj.__closure__ or ():
                try:
                    content = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if callable(content):
                    found += _functions_behind(content, depth - 1)
        return found
    forward = getattr(obj, "forward", None)
    return _functions_behind(forward, depth - 1) if forward is not None and depth > 0 else []


def _solves_triangular(function: Any) -> bool:
    """The function calls linalg's ``solve_triangular`` (or runs no Python code we can read:
    then it is not known to cut rows, and is left alone)."""
    functions = _functions_behind(function)
    return not functions or any("solve_triangular" in f.__code__.co_names for f in functions)


def solve_in_rows(system: torch.Tensor) -> torch.Tensor:
    """Forward substitution on a strictly lower-triangular ``[..., C, C]`` system, in place,
    one whole row at a time (see the module docstring); returns ``system``."""
    for i in range(1, system.shape[-1]):
        row = system[..., i, :]
        system[..., i, :] = row + (row.unsqueeze(-1) * system).sum(-2)
    return system


def chunk_gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = 64,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The chunked gated delta rule (same signature and results as the function it replaces).

    ``query``/``key``: ``[batch, seq, k_heads, k_dim]``; ``value``: ``[batch, seq, v_heads,
    v_dim]``; ``g`` (log decay, <= 0) and ``beta``: ``[batch, seq, v_heads]``. Returns the
    output ``[batch, seq, v_heads, v_dim]`` in the query's dtype and, when asked, the final
    recurrent state ``[batch, v_heads, k_dim, v_dim]`` (float32)."""
    out_dtype = query.dtype
    if key.shape[2] != value.shape[2]:  # grouped value heads
        repeat = value.shape[2] // key.shape[2]
        query = query.repeat_interleave(repeat, dim=2)
        key = key.repeat_interleave(repeat, dim=2)
    if use_qk_l2norm_in_kernel:
        query, key = _l2_normalized(query), _l2_normalized(key)
    q, k, v, b, log_decay = (
        x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g)
    )
    batch, heads, length, k_dim = k.shape
    v_dim = v.shape[-1]
    pad = (chunk_size - length % chunk_size) % chunk_size
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    b, log_decay = (F.pad(x, (0, pad)) for x in (b, log_decay))
    chunks = (length + pad) // chunk_size
    q = q * (1 / (q.shape[-1] ** 0.5))
    v_beta = v * b.unsqueeze(-1)
    k_beta = k * b.unsqueeze(-1)
    q, k, v_beta, k_beta = (
        x.reshape(batch, heads, chunks, chunk_size, x.shape[-1]) for x in (q, k, v_beta, k_beta)
    )
    cumulative = log_decay.reshape(batch, heads, chunks, chunk_size).cumsum(dim=-1)
    decay = (cumulative.unsqueeze(-1) - cumulative.unsqueeze(-2)).tril().exp().float().tril()
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).triu(0)
    system = solve_in_rows(-((k_beta @ k.transpose(-1, -2)) * decay).masked_fill(upper, 0))
    system = system + torch.eye(chunk_size, dtype=system.dtype, device=system.device)
    new_values = system @ v_beta
    k_cumdecay = system @ (k_beta * cumulative.exp().unsqueeze(-1))
    state = (
        torch.zeros(batch, heads, k_dim, v_dim, dtype=new_values.dtype, device=new_values.device)
        if initial_state is None
        else initial_state.to(new_values)
    )
    out = torch.zeros_like(new_values)
    for c in range(chunks):
        q_c, k_c = q[:, :, c], k[:, :, c]
        intra = q_c @ k_c.transpose(-1, -2) * decay[:, :, c]
        v_new = new_values[:, :, c] - k_cumdecay[:, :, c] @ state
        inter = (q_c * cumulative[:, :, c, :, None].exp()) @ state
        out[:, :, c] = inter + intra @ v_new
        last = cumulative[:, :, c, -1, None]
        state = (
            state * last[..., None].exp()
            + (k_c * (last - cumulative[:, :, c]).exp()[..., None]).transpose(-1, -2) @ v_new
        )
    out = out.reshape(batch, heads, -1, v_dim)[:, :, :length]
    return out.transpose(1, 2).contiguous().to(out_dtype), state if output_final_state else None


class DeltaRuleRows(TargetedAdapter[tuple[str, Any, dict[str, Any]]]):
    """The ``delta-rule-rows`` adapter (see the module docstring)."""

    name = "delta-rule-rows"
    missing = f"no forward calls a module-level {NAME}"

    def targets(self, model: nn.Module) -> list[tuple[str, Any, dict[str, Any]]]:
        found: list[tuple[str, Any, dict[str, Any]]] = []
        for path, module in model.named_modules():
            fn = forward_function(module)
            if fn is None:
                continue
            callers = functions_calling(fn, NAME)
            if not callers:
                continue
            owner = callers[0].__globals__
            if owner[NAME] is chunk_gated_delta_rule:
                continue  # already adapted
            if _solves_triangular(owner[NAME]):
                continue  # bridge-linalg-solve-triangular's case
            found.append((path, fn, owner))
        return found

    def edit_targets(
        self, model: nn.Module, edit: ModelEdit, targets: list[tuple[str, Any, dict[str, Any]]]
    ) -> None:
        for path, fn, owner in targets:
            edit.bind_forward(
                model.get_submodule(path),
                rebind_globals(fn, owner, {NAME: chunk_gated_delta_rule}),
            )


adapter = DeltaRuleRows()
