"""The unsupported-op policy (``--spyre-unsupported fail|fallback``).

``fail`` (default) runs the release as the catalogue describes it: an op the release cannot
lower raises ``SpyreLoweringError`` and the test fails naming the gap.

``fallback`` runs the same release with every *unsupported* op rule turned into a
``cpu-fallback`` rule for the same gap: the op runs on the host, the device warns once per op as
the real stack does for its fallbacks, and telemetry records the op under ``fallbacks`` and its
gap under ``gaps`` — so one run shows everything a model would hit instead of stopping at the
first gap. What stays as it is: native, decomposed and miscompiled ops; composite ops the device
decomposes; and layout rules (sticks, rank, offsets), which are not about a missing kernel —
switch those off with ``--spyre-layout-checks off``.

The policy is data, like the release itself: a :class:`~spyre_sim.catalogue.Release` whose
``op_rule`` answers differently, selected with ``spyre_sim.use_stack``. It keeps the release's
name and source, so reports still name the release the user chose.
"""

from __future__ import annotations

import dataclasses

import torch

from spyre_sim.catalogue import UNLOWERED_GAP, Decision, OpRule, Release

__all__ = ["apply_policy"]


def _composite(packet: str, overload: str) -> bool:
    """Whether the device decomposes this op itself (a CompositeImplicitAutograd kernel)."""
    name = packet.split(".", 1)[1] if packet.startswith("aten.") else packet
    qualname = f"aten::{name}" + ("" if overload == "default" else f".{overload}")
    try:
        return bool(
            torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CompositeImplicitAutograd")
        )
    except RuntimeError:
        return False


@dataclasses.dataclass(frozen=True, eq=False)
class _FallbackRelease(Release):
    """A release whose unsupported ops fall back to the host (see the module docstring)."""

    def op_rule(self, packet: str, overload: str = "default") -> OpRule:
        rule = super().op_rule(packet, overload)
        if rule.decision is not Decision.UNSUPPORTED:
            return rule
        if rule.gap == UNLOWERED_GAP and _composite(packet, overload):
            return rule  # the device decomposes it into ops it may lower
        note = f"{rule.note}; " if rule.note else ""
        return OpRule(
            Decision.FALLBACK, rule.gap or UNLOWERED_GAP,
            f"{note}unsupported at {self.name}: run on the host (--spyre-unsupported=fallback)",
        )  # fmt: skip


def apply_policy(release: Release, policy: str) -> Release:
    """The release to run for ``policy`` ("fail": unchanged; "fallback": see the module)."""
    if policy == "fail":
        return release
    values = {f.name: getattr(release, f.name) for f in dataclasses.fields(release)}
    return _FallbackRelease(**values)
