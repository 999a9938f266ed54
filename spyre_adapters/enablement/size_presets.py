"""The sizes a family is shrunk to, the config features varied beyond sizes, and the error a
family that does not build raises.

:data:`REALISTIC` (the default) has the sizes a Spyre deployment meets: hidden and FFN sizes
that are multiples of 64 (one stick), ``head_dim`` 64, grouped-query attention, a vocabulary
that is a multiple of 64, two layers. :data:`TINY` has the sizes of Transformers' own model
testers (hidden 32, FFN 37, 4 heads of 8, vocabulary 99), which are not stick aligned.
:data:`VARIANTS` vary the realistic preset where adapters have been wrong before (one
key/value head; odd batch, sequence and vocabulary sizes). How a config is shrunk to a preset
is :mod:`spyre_adapters.enablement.family_configs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spyre_adapters.errors import SpyreAdaptersError

__all__ = [
    "MQA",
    "NO_FEATURES",
    "ODD_SIZES",
    "REALISTIC",
    "TINY",
    "VARIANTS",
    "FamilyBuildError",
    "Features",
    "SizePreset",
]


class FamilyBuildError(SpyreAdaptersError):
    """A family did not build: ``stage`` is ``"config"``, ``"instantiate"``, ``"inputs"``,
    ``"forward"`` or ``"reference"`` (the CPU output cannot judge a device run; see
    :mod:`spyre_adapters.enablement.families`); ``reason`` is the underlying error in one line."""

    def __init__(self, model_type: str, stage: str, reason: str) -> None:
        self.model_type = model_type
        self.stage = stage
        self.reason = reason
        if stage == "reference":
            text = f"model_type {model_type!r} builds, but its CPU reference cannot judge a run"
        else:
            text = f"model_type {model_type!r} does not build from its config ({stage} failed)"
        super().__init__(f"{text}: {reason}")

    @classmethod
    def failed(cls, model_type: str, stage: str, exc: BaseException) -> FamilyBuildError:
        """The error for ``stage`` failing with ``exc`` (its first line, as ``reason``)."""
        text = str(exc).strip().splitlines()
        return cls(model_type, stage, f"{type(exc).__name__}: {text[0] if text else ''}"[:300])


@dataclass(frozen=True)
class SizePreset:
    """The sizes a family is shrunk to (``head_dim * heads == hidden``), and the input batch:
    ``batch`` rows of ``seq_len`` tokens (one image or audio clip per row)."""

    name: str
    hidden: int
    heads: int
    head_dim: int
    kv_heads: int
    intermediate: int
    layers: int
    vocab: int
    experts: int
    experts_per_token: int
    image_size: int
    patch_size: int
    audio_positions: int
    seq_len: int
    batch: int = 1


REALISTIC = SizePreset(
    name="realistic",
    hidden=256,
    heads=4,
    head_dim=64,
    kv_heads=2,
    intermediate=512,
    layers=2,
    vocab=1024,
    experts=4,
    experts_per_token=2,
    image_size=64,
    patch_size=16,
    audio_positions=32,
    seq_len=8,
)

TINY = SizePreset(
    name="tiny",
    hidden=32,
    heads=4,
    head_dim=8,
    kv_heads=2,
    intermediate=37,
    layers=2,
    vocab=99,
    experts=4,
    experts_per_token=2,
    image_size=32,
    patch_size=8,
    audio_positions=16,
    seq_len=7,
)


MQA = dataclasses.replace(REALISTIC, name="realistic-mqa", kv_heads=1)
"""The realistic sizes with one key/value head (multi-query attention)."""

ODD_SIZES = dataclasses.replace(REALISTIC, name="realistic-odd", vocab=1000, seq_len=13, batch=3)
"""The realistic widths with odd input and vocabulary sizes: 3 rows of 13 tokens, vocabulary
1000 (not a multiple of 64)."""

VARIANTS: tuple[SizePreset, ...] = (MQA, ODD_SIZES)
"""Variants of :data:`REALISTIC` a family is also checked at (see the module docstring)."""


@dataclass(frozen=True)
class Features:
    """Config features varied beyond sizes; ``None`` keeps the family's default, and a feature
    the family does not have is left alone.

    ``partial_rotary``: the fraction of each head rotated by RoPE (families with a partial
    rotary factor or a ``rotary_dim``). ``tie_embeddings``: the LM head shares the input
    embedding. ``sliding_window``: the window of sliding-window attention (families with a
    ``sliding_window``); where the family declares per-layer types, layers alternate sliding
    and full attention, starting with sliding.
    """

    partial_rotary: float | None = None
    tie_embeddings: bool | None = None
    sliding_window: int | None = None


NO_FEATURES = Features()
