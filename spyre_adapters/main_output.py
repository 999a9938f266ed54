"""The main output of a model forward: the one tensor compared with the CPU.

:func:`main_output_name` picks it from a forward's result: the first of ``prefer`` that is a
tensor (:data:`LOGITS_FIRST`: ``logits``, else ``last_hidden_state``), else the floating-point
top-level output with the most values (a dual encoder's ``text_embeds`` rather than its 1x1
``logits_per_image``: a cosine of one value is only its sign; the first such output on a tie,
e.g. ``start_logits`` before ``end_logits``), else the first key. :func:`output_named` reads
that output from a result (the first tensor, depth first, when the result has no such key,
e.g. a tuple from ``return_dict=False``). :func:`main_output` is both in one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["LOGITS_FIRST", "main_output", "main_output_name", "output_named"]

#: The outputs preferred for a language-model head: its logits, else the hidden states.
LOGITS_FIRST = ("logits", "last_hidden_state")


def main_output_name(out: Any, prefer: Sequence[str] = LOGITS_FIRST) -> str:
    """The name of the main output of ``out`` (see the module docstring); ``""`` when ``out``
    has no named outputs (a tensor, a tuple)."""
    keys = list(out.keys()) if hasattr(out, "keys") and hasattr(out, "get") else []
    for name in prefer:
        if isinstance(out.get(name) if keys else None, torch.Tensor):
            return name
    floating = [
        (out[name].numel(), -i, str(name))
        for i, name in enumerate(keys)
        if isinstance(out[name], torch.Tensor) and out[name].is_floating_point()
    ]
    if floating:
        return max(floating)[2]  # the most values; the first such output on a tie
    return str(keys[0]) if keys else ""


def output_named(out: Any, name: str) -> torch.Tensor:
    """The output ``name`` of a forward's result, else its first tensor (depth first);
    raises :class:`TypeError` when the result holds no tensor."""
    if isinstance(out, torch.Tensor):
        return out
    value = out.get(name) if hasattr(out, "get") else None
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(out, "to_tuple"):
        items = list(out.to_tuple())
    elif isinstance(out, dict):
        items = list(out.values())
    elif isinstance(out, (list, tuple)):
        items = list(out)
    else:
        items = []
    while items:
        item = items.pop(0)
        if isinstance(item, torch.Tensor):
            return item
        if isinstance(item, (list, tuple)):
            items[:0] = list(item)
        elif isinstance(item, dict):
            items[:0] = list(item.values())
    raise TypeError(f"the model output has no tensor (got {type(out).__name__})")


def main_output(out: Any, prefer: Sequence[str] = LOGITS_FIRST) -> torch.Tensor | None:
    """The main output tensor of ``out`` (see the module docstring), ``None`` without one."""
    try:
        return output_named(out, main_output_name(out, prefer))
    except TypeError:
        return None
