"""Stick-misaligned dims zero-padded to whole sticks, exactly (gap ``stick-align``).

The stack needs every matmul reduction dim to be a whole number of sticks (64 elements):
``Unsupported stick expression`` for a hidden size of 96 or an FFN intermediate size of 4304.
Real deployments reject such checkpoints; this adapter pads them instead.

- **FFN intermediate** (private to one MLP): in ``gate_proj``/``up_proj`` -> ``down_proj``,
  ``fc1`` -> ``fc2``, ``c_fc`` -> ``c_proj``, ``dense_h_to_4h`` -> ``dense_4h_to_h``, the first
  layers get zero rows (and zero bias) up to the next multiple of 64 and the last layer zero
  columns. The padded activations are ``act(0)``, finite, and meet only zero weights: exact.
- **Residual stream** (the hidden size, shared by the whole decoder), for Llama-style decoders
  with RMSNorm: the input embedding and every residual writer (``o_proj``, ``down_proj``) get
  zero output columns/rows, every reader (``q/k/v_proj``, ``gate/up_proj``, the LM head) zero
  input columns, so the padded lanes of the residual stream stay exactly zero. Each RMSNorm on
  the stream then averages over ``H'`` lanes instead of ``H``: with ``eps' = eps * H / H'`` and
  the weight scaled by ``sqrt(H / H')`` (unit-offset forms: ``1 + w'`` scaled, padded lanes
  ``w' = -1``, i.e. an effective weight of 0) it computes exactly the stock normalisation. The
  model's hidden states come out ``H'`` wide with zero padding lanes; the logits are unchanged.

Matched structurally (the names above, widths not multiples of 64); any other linear layer that
reads or writes the hidden size makes the residual part decline. Because the residual rewrite
touches the whole model, ``apply`` checks itself: it runs a few tokens through the model before
and after and raises (so the edit is rolled back) unless the logits agree. Run it before
``rms-norm`` (lower ``order``): it edits the stock norms' weight and epsilon.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.rms_norm import rms_form

__all__ = ["StickAlign", "adapter", "aligned"]

_STICK = 64
_MLP_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("gate_proj", "up_proj"), "down_proj"),
    (("fc1",), "fc2"),
    (("c_fc",), "c_proj"),
    (("dense_h_to_4h",), "dense_4h_to_h"),
    (("up_proj",), "down_proj"),
)
_READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_WRITERS = ("o_proj", "down_proj")
_CHECK_TOKENS = 5


def aligned(size: int) -> int:
    """``size`` rounded up to whole sticks."""
    return -(-size // _STICK) * _STICK


def _resized(layer: nn.Linear, out_features: int, in_features: int) -> nn.Linear:
    """A copy of ``layer`` zero-padded to ``out_features`` x ``in_features``."""
    weight = layer.weight.detach()
    new = nn.Linear(
        in_features, out_features, bias=layer.bias is not None, device="meta", dtype=weight.dtype
    )
    padded = weight.new_zeros(out_features, in_features)
    padded[: weight.shape[0], : weight.shape[1]] = weight
    new.weight = nn.Parameter(padded)
    if layer.bias is not None:
        bias = layer.bias.detach()
        wide = bias.new_zeros(out_features)
        wide[: bias.shape[0]] = bias
        new.bias = nn.Parameter(wide)
    return new


def _linear(module: nn.Module, name: str) -> nn.Linear | None:
    child = module._modules.get(name)
    return child if type(child) is nn.Linear else None


def _mlp_plan(model: nn.Module) -> list[tuple[str, tuple[str, ...], str, int]]:
    """``(mlp path, first layers, last layer, intermediate)`` for misaligned FFNs."""
    plan: list[tuple[str, tuple[str, ...], str, int]] = []
    for path, module in model.named_modules():
        for firsts, last in _MLP_SHAPES:
            layers = [_linear(module, n) for n in firsts]
            out = _linear(module, last)
            if out is None or any(layer is None for layer in layers):
                continue
            widths = {layer.out_features for layer in layers if layer is not None}
            if len(widths) != 1:
                continue
            inner = widths.pop()
            if out.in_features == inner and inner % _STICK:
                plan.append((path, firsts, last, inner))
            break
    return plan


def _residual_plan(model: nn.Module) -> dict[str, Any] | None:
    """What to pad for a misaligned hidden size, or None if the decoder is not Llama-shaped."""
    config = getattr(model, "config", None)
    hidden = getattr(config, "hidden_size", None)
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    if not isinstance(hidden, int) or hidden % _STICK == 0 or get_in is None or get_out is None:
        return None
    embedding, head = get_in(), get_out()
    if type(embedding) is not nn.Embedding or type(head) is not nn.Linear:
        return None
    if embedding.embedding_dim != hidden or head.in_features != hidden:
        return None
    readers: list[str] = []
    writers: list[str] = []
    norms: list[str] = []
    layers = 0
    for path, module in model.named_modules():
        attention, mlp = module._modules.get("self_attn"), module._modules.get("mlp")
        if attention is None or mlp is None:
            continue
        layers += 1
        for owner_name, owner in (("self_attn", attention), ("mlp", mlp)):
            for name in _READERS + _WRITERS:
                if _linear(owner, name) is not None:
                    target = readers if name in _READERS else writers
                    target.append(f"{path}.{owner_name}.{name}")
    if not layers:
        return None
    claimed = set(readers) | set(writers) | {"lm_head"}
    head_path = next(p for p, m in model.named_modules() if m is head)
    claimed.add(head_path)
    embed_path = next(p for p, m in model.named_modules() if m is embedding)
    claimed.add(embed_path)
    modules = dict(model.named_modules())
    for name, param in model.named_parameters():
        path = name.rpartition(".")[0]
        if path in claimed or hidden not in param.shape:
            continue
        module = modules[path]
        if param.dim() != 1 or name.rpartition(".")[2] != "weight":
            return None  # an unknown reader or writer of the stream: cannot pad it safely
        if ".self_attn." in f".{path}.":
            return None  # a norm over the projected q/k (OLMo-2 style), not on the stream
        if rms_form(module) is None:
            return None  # LayerNorm and friends would see the padding lanes
        norms.append(path)
    return {
        "hidden": hidden,
        "embedding": embed_path,
        "head": head_path,
        "readers": readers,
        "writers": writers,
        "norms": norms,
    }


def _logits(model: nn.Module) -> torch.Tensor | None:
    config = getattr(model, "config", None)
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 2:
        return None
    device = next(model.parameters()).device
    ids = (torch.arange(_CHECK_TOKENS) * 7 + 3) % vocab
    with torch.no_grad():
        out = model(ids[None].to(device), use_cache=False)
    logits = getattr(out, "logits", None)
    return None if logits is None else logits.detach().float().cpu()


def _difference(
    before: torch.Tensor | None, after: torch.Tensor | None, exact_dtype: bool
) -> str | None:
    """Why ``after`` differs from ``before`` (None when they agree or were not computed).

    In fp32 the padded model must agree to rounding; in half precision the rescaled norm
    weights round differently, so agreement means cosine >= 0.999 and the same top-1."""
    if before is None or after is None:
        return None
    if after.shape != before.shape:
        return f"shape {tuple(after.shape)} instead of {tuple(before.shape)}"
    if exact_dtype:
        if torch.allclose(after, before, rtol=1e-3, atol=1e-4):
            return None
        return f"max difference {float((after - before).abs().max()):.3g}"
    cosine = float(torch.nn.functional.cosine_similarity(after.flatten(), before.flatten(), dim=0))
    if cosine >= 0.999 and torch.equal(after.argmax(-1), before.argmax(-1)):
        return None
    return f"cosine {cosine:.5f} or a different top-1 token"


class StickAlign:
    """The ``stick-align-padding`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return bool(_mlp_plan(model)) or _residual_plan(model) is not None

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        mlps = _mlp_plan(model)
        residual = _residual_plan(model)
        if not mlps and residual is None:
            raise ValueError(
                f"stick-align-padding does not apply to {type(model).__name__}: no FFN with a "
                "misaligned intermediate size and no Llama-style decoder with a misaligned hidden size"
            )
        before = _logits(model) if residual is not None else None
        for path, firsts, last, inner in mlps:
            wide = aligned(inner)
            module = model.get_submodule(path)
            for name in firsts:
                layer = _linear(module, name)
                assert layer is not None
                edit.replace_module(
                    f"{path}.{name}" if path else name, _resized(layer, wide, layer.in_features)
                )
            layer = _linear(module, last)
            assert layer is not None
            edit.replace_module(
                f"{path}.{last}" if path else last, _resized(layer, layer.out_features, wide)
            )
        if residual is not None:
            self._pad_residual(model, edit, residual)
            try:
                after = _logits(model)
            except Exception as error:
                raise ValueError(
                    f"stick-align-padding: {type(model).__name__} no longer runs after the "
                    f"residual-stream padding ({error}); it has a part the padding rules do not "
                    "cover. The edit is rolled back; report the family."
                ) from error
            exact = next(model.parameters()).dtype in (torch.float32, torch.float64)
            problem = _difference(before, after, exact)
            if problem is not None:
                raise ValueError(
                    f"stick-align-padding: the residual-stream padding changed the logits "
                    f"({problem}); {type(model).__name__} has a part the padding rules do not "
                    "cover. The edit is rolled back; report the family."
                )

    def _pad_residual(self, model: nn.Module, edit: ModelEdit, plan: dict[str, Any]) -> None:
        hidden: int = plan["hidden"]
        wide = aligned(hidden)
        embedding = model.get_submodule(plan["embedding"])
        assert isinstance(embedding, nn.Embedding)
        weight = embedding.weight.detach()
        padded = weight.new_zeros(weight.shape[0], wide)
        padded[:, :hidden] = weight
        new_embedding = nn.Embedding(
            weight.shape[0], wide, padding_idx=embedding.padding_idx, device="meta"
        )
        new_embedding.weight = nn.Parameter(padded)
        edit.replace_module(plan["embedding"], new_embedding)
        for path in [*plan["readers"], plan["head"]]:
            layer = model.get_submodule(path)
            assert isinstance(layer, nn.Linear)
            edit.replace_module(path, _resized(layer, layer.out_features, wide))
        for path in plan["writers"]:
            layer = model.get_submodule(path)
            assert isinstance(layer, nn.Linear)
            edit.replace_module(path, _resized(layer, wide, layer.in_features))
        scale = math.sqrt(hidden / wide)
        for path in plan["norms"]:
            norm = model.get_submodule(path)
            form = rms_form(norm)
            assert form is not None
            eps_name, unit_offset = form
            old = norm._parameters["weight"]
            assert old is not None
            w = old.detach()
            if unit_offset:
                new = w.new_full((wide,), -1.0)
                new[:hidden] = (1.0 + w) * scale - 1.0
            else:
                new = w.new_zeros(wide)
                new[:hidden] = w * scale
            edit.set_attr(norm, "weight", nn.Parameter(new))
            edit.set_attr(norm, eps_name, getattr(norm, eps_name) * hidden / wide)


adapter = StickAlign()
