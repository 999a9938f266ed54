"""``rope-rotation`` 1.1: 1.0's rotation, declined where its host tables cannot be built.

1.0 (:mod:`spyre_adapters.library.rope`) matches any stock rotary embedding feeding
``apply_rotary_pos_emb`` and builds its host tables at apply time by calling the stock rotary
module with 1-D positions. Multimodal rotary embeddings (Qwen2-VL and GLM-4V's 3-D ``mrope``
position ids, Cosmos 3's permuted ones, ERNIE 4.5 VL) index their positions as 3-D, so the
build raised inside ``apply``: the model failed to prepare instead of running with the other
adapters. 1.1 matches only where a two-position probe of every rotary module builds, and is
otherwise the same adapter.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.library.rope import HostRotaryEmbedding, RopeRotation, _plan

__all__ = ["ProbedRopeRotation", "adapter"]


class ProbedRopeRotation(RopeRotation):
    """``rope-rotation`` 1.1 (see the module docstring)."""

    def matches(self, model: nn.Module) -> bool:
        plan = _plan(model)
        if plan is None:
            return False
        try:
            for path in plan.rotary:
                HostRotaryEmbedding(model.get_submodule(path), plan.head_dim, 2, plan.layouts[0])
        except Exception:  # the stock module does not take 1-D positions: not the standard form
            return False
        return True


adapter = ProbedRopeRotation()
