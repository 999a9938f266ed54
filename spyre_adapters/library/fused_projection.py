"""Fused projections split into separate ``Linear`` layers at prepare time, and GPT-2 ``Conv1D``
turned into ``Linear`` (gap ``offset-slice``).

A fused projection (``c_attn`` = Q|K|V in GPT-2, ``qkv_proj`` in Phi-3, ``gate_up_proj`` =
gate|up in Phi-3, GLM, GLM-4) is computed once and then cut with ``split``/``chunk``/``[..., a:b]``
at non-zero offsets inside a stick, which the stack cannot do before 2026.06. This adapter
replaces such a projection with :class:`SplitProjection`, which holds one ``Linear`` per part
(weights cut from the fused one on the host at prepare time) and returns
:class:`ProjectionParts`: the parts, computed separately, that answer the family's own
``split``/``chunk``/slicing code by handing back whole parts. A request that does not fall on
part boundaries raises (it never returns different numbers), and the family's forward is left
as it is, so other adapters that rebind that forward still compose.

Every remaining ``transformers`` ``Conv1D`` (GPT-2's ``addmm`` on a flattened view) becomes the
equivalent ``nn.Linear`` with the transposed weight.

Matched structurally: a ``Conv1D``, or a ``Linear``/``Conv1D`` named ``c_attn`` (parent with
``split_size``), ``qkv_proj`` (parent config with head counts and ``head_dim``) or
``gate_up_proj`` (two equal halves) whose part sizes add up to its output width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit

__all__ = ["FusedProjectionSplit", "ProjectionParts", "SplitProjection", "adapter"]


class ProjectionParts:
    """The output of a fused projection, kept as its separately computed parts (last dim).

    With ``groups > 1`` the fused layout is head-major (GPT-NeoX): the fused last dim is
    ``groups`` blocks, each the concatenation of one ``1/groups`` slice of every part. Such a
    result only answers a ``view`` that splits the last dim into ``(groups, block)``, which
    yields an ordinary (``groups == 1``) result.
    """

    def __init__(self, parts: tuple[torch.Tensor, ...], groups: int = 1) -> None:
        self.parts = parts
        self.groups = groups
        self.sizes = tuple(int(p.shape[-1]) for p in parts)

    @property
    def shape(self) -> torch.Size:
        return torch.Size((*self.parts[0].shape[:-1], sum(self.sizes)))

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self) -> int:
        return self.parts[0].dim()

    def dim(self) -> int:
        return self.ndim

    def _is_last(self, dim: int) -> bool:
        return dim in (-1, self.ndim - 1)

    def _refuse(self, what: str) -> ValueError:
        return ValueError(
            f"fused-projection-split: {what} does not fall on the part boundaries {self.sizes} "
            "of the split projection; it would need a concatenation on the device. Remedy: "
            "restore the model (spyre_adapters.restore) and report the family so the adapter "
            "declines it."
        )

    def _take(self, sizes: list[int]) -> tuple[torch.Tensor, ...]:
        if self.groups != 1 or list(self.sizes) != sizes:
            raise self._refuse(f"a split into {sizes}")
        return self.parts

    def split(
        self, split_size: int | list[int] | tuple[int, ...], dim: int = 0
    ) -> tuple[torch.Tensor, ...]:
        if not self._is_last(dim):
            raise self._refuse(f"a split on dim {dim}")
        total = sum(self.sizes)
        if isinstance(split_size, int):
            sizes = [split_size] * (total // split_size) + (
                [total % split_size] if total % split_size else []
            )
        else:
            sizes = [int(s) for s in split_size]
        return self._take(sizes)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[torch.Tensor, ...]:
        if not self._is_last(dim):
            raise self._refuse(f"a chunk on dim {dim}")
        total = sum(self.sizes)
        size = -(-total // chunks)
        return self.split(size, dim)

    def unsqueeze(self, dim: int) -> ProjectionParts:
        new_ndim = self.ndim + 1
        if dim in (-1, new_ndim - 1):
            raise self._refuse("an unsqueeze behind the feature dim")
        return ProjectionParts(tuple(p.unsqueeze(dim) for p in self.parts), self.groups)

    def view(self, *shape: Any) -> ProjectionParts:
        target = [
            int(v)
            for v in (shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        ]
        lead = list(self.parts[0].shape[:-1])
        total = sum(self.sizes)
        if len(target) == len(lead) + 2 and target[: len(lead)] == lead and self.groups > 1:
            block = target[-1]
            if target[-2] in (-1, self.groups) and block * self.groups == total:
                return ProjectionParts(
                    tuple(
                        p.view(*lead, self.groups, p.shape[-1] // self.groups) for p in self.parts
                    )
                )
        raise self._refuse(f"a view to {target}")

    def transpose(self, dim0: int, dim1: int) -> ProjectionParts:
        if self._is_last(dim0) or self._is_last(dim1):
            raise self._refuse(f"a transpose of dims {dim0} and {dim1}")
        return ProjectionParts(tuple(p.transpose(dim0, dim1) for p in self.parts), self.groups)

    def __getitem__(self, key: Any) -> torch.Tensor:
        if (
            isinstance(key, tuple)
            and len(key) == 2
            and key[0] is Ellipsis
            and isinstance(key[1], slice)
        ):
            wanted = key[1]
            if wanted.step in (None, 1):
                total = sum(self.sizes)
                start, stop, _ = wanted.indices(total)
                offset = 0
                for part, size in zip(self.parts, self.sizes, strict=True):
                    if (start, stop) == (offset, offset + size):
                        return part
                    offset += size
        raise self._refuse(f"the index {key!r}")


class SplitProjection(nn.Module):
    """One ``Linear`` per part of a fused projection; forward returns :class:`ProjectionParts`."""

    def __init__(self, parts: list[nn.Linear], groups: int = 1) -> None:
        super().__init__()
        self.parts = nn.ModuleList(parts)
        self.groups = groups

    def forward(self, hidden_states: torch.Tensor) -> ProjectionParts:
        return ProjectionParts(tuple(part(hidden_states) for part in self.parts), self.groups)


def _weight_and_bias(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(weight [out, in], bias)`` of a Linear or a transformers Conv1D (weight [in, out])."""
    weight = module._parameters["weight"]
    bias = module._parameters.get("bias")
    assert weight is not None
    if isinstance(module, nn.Linear):
        return weight.detach(), None if bias is None else bias.detach()
    return weight.detach().t(), None if bias is None else bias.detach()


def _linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    layer = nn.Linear(
        weight.shape[1], weight.shape[0], bias=bias is not None, device="meta", dtype=weight.dtype
    )
    layer.weight = nn.Parameter(weight.contiguous().clone())
    if bias is not None:
        layer.bias = nn.Parameter(bias.contiguous().clone())
    return layer


def _is_conv1d(module: nn.Module) -> bool:
    from transformers.pytorch_utils import Conv1D

    return isinstance(module, Conv1D)


def _out_features(module: nn.Module) -> int:
    return int(_weight_and_bias(module)[0].shape[0])


def _part_sizes(
    name: str, module: nn.Module, parent: nn.Module, config: Any
) -> tuple[list[int], int] | None:
    """``(part sizes, head groups)`` of a fused projection (groups > 1: head-major layout)."""
    if not (isinstance(module, nn.Linear) or _is_conv1d(module)):
        return None
    out = _out_features(module)
    heads = getattr(config, "num_attention_heads", None)
    head_size = getattr(parent, "head_size", None)
    if (
        name == "query_key_value"
        and type(module) is nn.Linear
        and isinstance(heads, int)
        and isinstance(head_size, int)
        and out == 3 * heads * head_size
    ):
        return [heads * head_size] * 3, heads
    sizes: list[int] | None = None
    split_size = getattr(parent, "split_size", None)
    if name == "c_attn" and isinstance(split_size, int):
        sizes = [split_size] * 3
    elif name == "qkv_proj":
        head_dim = getattr(parent, "head_dim", None)
        heads = getattr(config, "num_attention_heads", None)
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        if isinstance(head_dim, int) and isinstance(heads, int) and isinstance(kv_heads, int):
            sizes = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
    elif name == "gate_up_proj" and out % 2 == 0:
        sizes = [out // 2, out // 2]
    return (sizes, 1) if sizes is not None and sum(sizes) == out else None


def _plan(model: nn.Module) -> list[tuple[str, tuple[list[int], int] | None]]:
    """``(path, (part sizes, groups))`` for fused projections, ``(path, None)`` for Conv1D."""
    config = getattr(model, "config", None)
    plan: list[tuple[str, tuple[list[int], int] | None]] = []
    for parent_path, parent in model.named_modules():
        for name, child in parent.named_children():
            path = f"{parent_path}.{name}" if parent_path else name
            sizes = _part_sizes(name, child, parent, getattr(parent, "config", config))
            if sizes is not None:
                plan.append((path, sizes))
            elif _is_conv1d(child):
                plan.append((path, None))
    return plan


class FusedProjectionSplit:
    """The ``fused-projection-split`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return bool(_plan(model))

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        plan = _plan(model)
        if not plan:
            raise ValueError(
                f"fused-projection-split does not apply to {type(model).__name__}: no Conv1D and "
                "no fused c_attn / qkv_proj / gate_up_proj projection found"
            )
        for path, layout in plan:
            module = model.get_submodule(path)
            weight, bias = _weight_and_bias(module)
            if layout is None:
                edit.replace_module(path, _linear(weight, bias))
                continue
            sizes, groups = layout
            # rows of each part: head-major layouts take one slice of every head block
            block = sum(sizes) // groups
            rows = torch.arange(sum(sizes)).view(groups, block)
            parts: list[nn.Linear] = []
            offset = 0
            for size in sizes:  # cut on the host, once, at prepare time
                width = size // groups
                index = rows[:, offset : offset + width].reshape(-1)
                part_bias = None if bias is None else bias[index]
                parts.append(_linear(weight[index], part_bias))
                offset += width
            edit.replace_module(path, SplitProjection(parts, groups))


adapter = FusedProjectionSplit()
