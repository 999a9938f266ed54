"""Stick-misaligned shapes computed in stick-aligned form, for any model (gaps ``stick-align``
and ``sub-stick-head``): the ``stick-align-padding`` and ``head-padding`` adapters, 2.x.

Both run the model's forwards under :class:`~spyre_adapters.library._stick_layout.StickLayout`,
which rewrites only the calls whose shapes the device refuses (see that module): matmuls with a
reduction dim that is not a whole number of sticks are zero-padded along it
(``stick-align-padding``); views that split the last dim into heads narrower than a stick, and
cuts that halve a last dim narrower than two sticks, become placement/selection matmuls
(``head-padding``). Matched by structure, not by family: any model with a weight dim that is
not a whole number of sticks, or with attention heads narrower than two sticks.

Unlike the 1.x versions, nothing of the model is padded: the hidden states, attention caches,
parameters and state dict keep their stock shapes (1.x padded the residual stream and the
heads themselves, which showed in hidden states and caches), and every family is covered, not
only Llama-shaped decoders with rope-rotation applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._stick_layout import STICK, enable

__all__ = ["HeadLayout", "KPadding", "head_padding", "stick_align_padding"]

_HEAD_DIM_KEYS = ("head_dim", "d_kv", "kv_channels", "attention_head_size", "head_size")


def _configs(config: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """``config`` and every sub-config it holds (text, vision, audio, encoder, ...; the
    per-layer configs of a model whose layers differ)."""
    seen = set() if seen is None else seen
    if config is None or id(config) in seen or not hasattr(config, "to_dict"):
        return
    seen.add(id(config))
    yield config
    for value in vars(config).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if hasattr(item, "to_dict") and hasattr(item, "model_type"):
                yield from _configs(item, seen)


def _attribute(config: Any, key: str) -> Any:
    """``config.key``, or ``None`` where the config has none or refuses a global value (a
    per-layer attribute of a model whose layers differ raises rather than answer)."""
    try:
        return getattr(config, key, None)
    except Exception:
        return None


def _head_dims(model: nn.Module) -> set[int]:
    dims: set[int] = set()
    for config in _configs(getattr(model, "config", None)):
        for key in _HEAD_DIM_KEYS:
            value = _attribute(config, key)
            if isinstance(value, int) and value > 0:
                dims.add(value)
        hidden = _attribute(config, "hidden_size")
        heads = _attribute(config, "num_attention_heads")
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads == 0:
            dims.add(hidden // heads)
    return dims


class KPadding:
    """``stick-align-padding`` 2.x (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        return any(
            param.dim() >= 2
            and param.is_floating_point()
            and any(size % STICK for size in param.shape[-2:])
            for param in model.parameters()
        )

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, "stick-align")


class HeadLayout:
    """``head-padding`` 2.x (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        # heads narrower than two sticks, by the config or by a weight narrower than that
        # (configs name their head sizes in many ways: embed_dim / num_heads lists, ...)
        if any(d < 2 * STICK for d in _head_dims(model)):
            return True
        return any(
            param.dim() >= 2 and param.is_floating_point() and min(param.shape) < 2 * STICK
            for param in model.parameters()
        )

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, "sub-stick-head")


stick_align_padding = KPadding()
head_padding = HeadLayout()
