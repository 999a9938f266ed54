"""The case space of differential runs: :class:`Space` (the values each axis of a drawn
configuration takes, simplest first), :data:`SPACE`, a drawn :class:`Case`, and drawing one
(:func:`draw_case`, with any choice function: a seeded ``random.Random`` or Hypothesis) or a
seeded list (:func:`drawn_cases`). See :mod:`spyre_adapters.enablement.differential`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from spyre_adapters.enablement.size_presets import REALISTIC, Features, SizePreset

__all__ = ["SPACE", "Case", "Choose", "Space", "draw_case", "drawn_cases"]

T = TypeVar("T")

Choose = Callable[[Sequence[T]], T]
"""Picks one of the options (the first is the simplest: Hypothesis shrinks towards it)."""


@dataclass(frozen=True)
class Space:
    """The values each axis of a drawn configuration takes, simplest first.

    ``kv`` is ``"one"`` (multi-query), ``"some"`` (grouped: a proper divisor of the head count,
    one if there is none) or ``"all"`` (multi-head); ``head_dims`` are below, at and above a
    stick (64 elements); ``padding`` is ``"none"``, ``"right"`` or ``"left"`` (every row after
    the first is shorter); ``attention`` ``None`` keeps the family's default implementation;
    ``images`` are ``(image_size, patch_size)``.
    """

    heads: tuple[int, ...] = (4, 2, 1, 6)
    kv: tuple[str, ...] = ("one", "some", "all")
    head_dims: tuple[int, ...] = (64, 32, 128, 16, 96)
    intermediates: tuple[int, ...] = (256, 128, 200, 344)
    vocabs: tuple[int, ...] = (256, 1000, 250, 509)
    layers: tuple[int, ...] = (2, 1)
    batches: tuple[int, ...] = (1, 2, 3)
    seq_lens: tuple[int, ...] = (7, 1, 13, 2, 31, 64, 65)
    padding: tuple[str, ...] = ("none", "right", "left")
    attention: tuple[str | None, ...] = (None, "eager")
    decode: tuple[bool, ...] = (False, True)
    partial_rotary: tuple[float | None, ...] = (None, 0.5, 0.25)
    tie_embeddings: tuple[bool | None, ...] = (None, True, False)
    sliding_window: tuple[int | None, ...] = (None, 4, 16)
    images: tuple[tuple[int, int], ...] = ((32, 8), (48, 16), (64, 16))
    seeds: int = 2**16


SPACE = Space()
"""The configuration space differential runs draw from."""


def _kv_heads(heads: int, kv: str) -> int:
    if kv == "all":
        return heads
    if kv == "some":
        return next((d for d in range(2, heads) if heads % d == 0), 1)
    return 1


@dataclass(frozen=True)
class Case:
    """One drawn configuration of a family (see :mod:`spyre_adapters.enablement.differential`)."""

    family: str
    sizes: SizePreset
    features: Features
    attention: str | None
    padding: str
    seed: int
    decode: bool = False

    def describe(self) -> str:
        """A one-line description, enough to rebuild the case by hand."""
        s, f = self.sizes, self.features
        parts = [
            f"{self.family}: heads {s.heads} kv {s.kv_heads} head_dim {s.head_dim}",
            f"hidden {s.hidden} ffn {s.intermediate} vocab {s.vocab} layers {s.layers}",
            f"batch {s.batch} x seq {s.seq_len} padding {self.padding}"
            + (" + 1 decode step" if self.decode else ""),
        ]
        extras = [
            f"attention {self.attention}" if self.attention else "",
            f"partial_rotary {f.partial_rotary}" if f.partial_rotary is not None else "",
            f"tie_embeddings {f.tie_embeddings}" if f.tie_embeddings is not None else "",
            f"sliding_window {f.sliding_window}" if f.sliding_window is not None else "",
            f"image {s.image_size}/{s.patch_size}",
            f"seed {self.seed}",
        ]
        return ", ".join(parts + [e for e in extras if e])

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "sizes": dataclasses.asdict(self.sizes),
            "features": dataclasses.asdict(self.features),
            "attention": self.attention,
            "padding": self.padding,
            "seed": self.seed,
            "decode": self.decode,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Case:
        return cls(
            family=data["family"],
            sizes=SizePreset(**data["sizes"]),
            features=Features(**data["features"]),
            attention=data["attention"],
            padding=data["padding"],
            seed=int(data["seed"]),
            decode=bool(data.get("decode", False)),
        )


def draw_case(family: str, choose: Choose[Any], space: Space = SPACE) -> Case:
    """Draw a configuration of ``family`` from ``space``, one axis at a time with ``choose``."""
    heads = choose(space.heads)
    head_dim = choose(space.head_dims)
    image_size, patch_size = choose(space.images)
    sizes = dataclasses.replace(
        REALISTIC,
        name="drawn",
        heads=heads,
        kv_heads=_kv_heads(heads, choose(space.kv)),
        head_dim=head_dim,
        hidden=heads * head_dim,
        intermediate=choose(space.intermediates),
        vocab=choose(space.vocabs),
        layers=choose(space.layers),
        batch=choose(space.batches),
        seq_len=choose(space.seq_lens),
        image_size=image_size,
        patch_size=patch_size,
    )
    features = Features(
        partial_rotary=choose(space.partial_rotary),
        tie_embeddings=choose(space.tie_embeddings),
        sliding_window=choose(space.sliding_window),
    )
    return Case(
        family=family,
        sizes=sizes,
        features=features,
        attention=choose(space.attention),
        padding=choose(space.padding),
        decode=choose(space.decode),
        seed=choose(range(space.seeds)),
    )


def drawn_cases(family: str, count: int, seed: int = 0, space: Space = SPACE) -> list[Case]:
    """``count`` configurations of ``family`` drawn from ``space`` by a ``random.Random``
    seeded with ``seed`` and the family name: the same list in every process and run."""
    rng = random.Random(f"{seed}:{family}")
    return [draw_case(family, rng.choice, space) for _ in range(count)]
