"""``host-mask`` 1.0.0, as released: attention masks built on the host, always materialised,
with a finite fill value (gaps ``tril-triu``, ``no-inf``).

Kept, unchanged, for the locks that pin 1.0.0; 1.0.1 (:mod:`spyre_adapters.library.host_mask`)
supersedes it at every release. Its known defect: where a skipped mask means full attention
(PaliGemma's Gemma, ``is_causal = False``), 1.0.0 still builds a causal one and changes the
output (cosine 0.981 against the stock model); 1.0.1 keeps that mask skipped.

Matches models whose forward builds its masks with the ``masking_utils`` factories
(``create_causal_mask``, ``create_sliding_window_causal_mask``, ``create_chunked_causal_mask``,
``create_bidirectional_mask``, ...), which is every decoder rewritten on the Transformers v5
attention interface (Llama, Mistral, Qwen, Gemma, GPT-2, Phi, ...), with the ``eager`` or ``sdpa``
attention implementation.

Each such forward is bound, per instance, to a copy whose factories

- run on the host (the 2-D padding mask and the position ids are moved to the CPU; the
  embeddings are replaced by a zero-stride CPU stand-in, since the factories only read their
  shape and dtype), so the causal and sliding-window structure is never built on the device;
- never skip the mask (SDPA's implicit ``is_causal`` path builds a causal mask on the device);
- return an additive mask filled with ``finfo(dtype).min / 2`` instead of ``-inf`` or
  ``finfo.min``: DL16 has no infinity, and half the minimum cannot overflow when added.

The finite fill is what this adapter exists for at every release (``no-inf`` is lasting), so it
is permanent even after the stack builds triangular masks itself. Softmax of a row containing
``min / 2`` entries gives exactly 0 for them in fp32, so results match the stock model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import (
    forward_function,
    functions_calling,
    rebind_globals,
)

__all__ = ["HostMask", "adapter", "finite_fill"]

_FACTORIES = (
    "create_causal_mask",
    "create_sliding_window_causal_mask",
    "create_chunked_causal_mask",
    "create_bidirectional_mask",
    "create_bidirectional_sliding_window_mask",
)
_SUPPORTED_ATTENTION = frozenset({"eager", "sdpa"})
_MARK = "_spyre_host_mask"


def finite_fill(dtype: torch.dtype) -> float:
    """The additive-mask fill value: half the most negative finite value of ``dtype``."""
    return float(torch.finfo(dtype).min) / 2


def _host(value: Any) -> Any:
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _host_factory(stock: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(stock)
    skip_flags = [name for name in signature.parameters if name.startswith("allow_is_")]

    def factory(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        arguments = bound.arguments
        embeds = arguments.get("inputs_embeds", arguments.get("input_embeds"))
        if not isinstance(embeds, torch.Tensor):
            return stock(*args, **kwargs)
        device, dtype = embeds.device, embeds.dtype
        stand_in = torch.zeros((), dtype=dtype).expand(embeds.shape)
        for name in list(arguments):
            if isinstance(arguments[name], torch.Tensor):
                arguments[name] = stand_in if arguments[name] is embeds else _host(arguments[name])
        for name in skip_flags:
            arguments[name] = False
        mask = stock(*bound.args, **bound.kwargs)
        if not isinstance(mask, torch.Tensor) or mask.dim() != 4:
            return mask
        fill = finite_fill(dtype)
        if mask.dtype == torch.bool:
            additive = torch.where(
                mask, torch.zeros((), dtype=dtype), torch.full((), fill, dtype=dtype)
            )
        else:
            # -inf and finfo.min become the finite fill; any other bias a caller passed stays
            additive = torch.where(mask <= fill, torch.full((), fill, dtype=dtype), mask.to(dtype))
        return additive.to(device=device)

    setattr(factory, _MARK, True)
    return factory


def _attention_implementation(model: nn.Module) -> str | None:
    config = getattr(model, "config", None)
    value = getattr(config, "_attn_implementation", None)
    return value if isinstance(value, str) else None


def _targets(model: nn.Module) -> list[tuple[str, Any, dict[str, Any], list[str]]]:
    targets: list[tuple[str, Any, dict[str, Any], list[str]]] = []
    for path, module in model.named_modules():
        fn = forward_function(module)
        if fn is None:
            continue
        for name in _FACTORIES:
            callers = functions_calling(fn, name)
            if not callers:
                continue
            owner = callers[0].__globals__
            names = [n for n in _FACTORIES if n in owner and functions_calling(fn, n)]
            if any(getattr(owner[n], _MARK, False) for n in names):
                break  # already adapted
            targets.append((path, fn, owner, names))
            break
    return targets


class HostMask:
    """The ``host-mask`` adapter (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return _attention_implementation(model) in _SUPPORTED_ATTENTION and bool(_targets(model))

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        implementation = _attention_implementation(model)
        targets = _targets(model)
        if implementation not in _SUPPORTED_ATTENTION or not targets:
            raise ValueError(
                f"host-mask does not apply to {type(model).__name__} (attention "
                f"{implementation!r}): it needs masks from Transformers' masking_utils and the "
                f"attention implementation one of {sorted(_SUPPORTED_ATTENTION)}"
            )
        factories: dict[tuple[int, str], Callable[..., Any]] = {}
        for path, fn, owner, names in targets:
            overrides = {
                name: factories.setdefault((id(owner), name), _host_factory(owner[name]))
                for name in names
            }
            edit.bind_forward(model.get_submodule(path), rebind_globals(fn, owner, overrides))


adapter = HostMask()
