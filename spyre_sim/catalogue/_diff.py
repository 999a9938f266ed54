"""What changes between two releases of a catalogue, and which release file set each change.

:func:`diff` (``Catalogue.diff``) compares gap states and op rules of two releases and names,
for each change, the release in between whose file set the new value and that line's
evidence; a change that makes or ends a miscompile says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spyre_sim.catalogue._model import _UNLOWERED_RULE, Decision, GapState, OpRule
from spyre_sim.errors import SpyreSimError

if TYPE_CHECKING:
    from spyre_sim.catalogue._catalogue import Catalogue


@dataclass(frozen=True)
class GapChange:
    """A gap whose state differs between two releases."""

    gap: str
    before: GapState | None
    after: GapState
    set_in: str  # the release whose file set ``after``
    source: tuple[str, ...]
    note: str = ""

    @property
    def miscompile(self) -> str | None:
        """``"appears"`` / ``"goes"`` when the change starts or ends a miscompile."""
        if self.after is GapState.MISCOMPILED and self.before is not GapState.MISCOMPILED:
            return "appears"
        if self.before is GapState.MISCOMPILED and self.after is not GapState.MISCOMPILED:
            return "goes"
        return None


@dataclass(frozen=True)
class OpChange:
    """An op key whose decision or gap differs between two releases."""

    op: str
    before: OpRule
    after: OpRule
    set_in: str

    @property
    def miscompile(self) -> str | None:
        was = self.before.decision is Decision.MISCOMPILED
        now = self.after.decision is Decision.MISCOMPILED
        return "appears" if now and not was else "goes" if was and not now else None


@dataclass(frozen=True)
class CatalogueDiff:
    """What changes from release ``old`` to release ``new`` (see :meth:`Catalogue.diff`)."""

    old: str
    new: str
    gaps: tuple[GapChange, ...]
    ops: tuple[OpChange, ...]

    @property
    def miscompiles(self) -> tuple[GapChange | OpChange, ...]:
        """The changes that start or end a miscompile (gap states and op decisions)."""
        changes: list[GapChange | OpChange] = [*self.gaps, *self.ops]
        return tuple(c for c in changes if c.miscompile is not None)


def diff(catalogue: Catalogue, old: str, new: str) -> CatalogueDiff:
    """What changes from release ``old`` to release ``new`` (``old`` must be older): gap
    states, op rules, and the miscompiles that appear or go. Each change names the
    release in ``(old, new]`` whose file set the new value, and that line's evidence."""
    a, b = catalogue.release(old), catalogue.release(new)
    if not a.version < b.version:
        raise SpyreSimError(
            f"a diff goes from an older release to a newer one (got {a.name} -> {b.name}); "
            f"swap them: --diff {b.name} {a.name}"
        )
    between = [r for r in catalogue.releases if a.version < r.version <= b.version]
    gaps: list[GapChange] = []
    for gap_id in sorted(set(a.gap_states) | set(b.gap_states)):
        before, after = a.gap_states.get(gap_id), b.gap_states.get(gap_id)
        if before is after or after is None:
            continue
        set_in = next((r.name for r in reversed(between) if gap_id in r.own_gaps), b.name)
        gaps.append(
            GapChange(
                gap_id,
                before,
                after,
                set_in,
                b.gap_sources.get(gap_id, ()),
                b.gap_notes.get(gap_id, ""),
            )
        )
    ops: list[OpChange] = []
    for key in sorted(set(a.op_rules) | set(b.op_rules)):
        before_rule = a.op_rules.get(key, _UNLOWERED_RULE)
        after_rule = b.op_rules.get(key, _UNLOWERED_RULE)
        if (before_rule.decision, before_rule.gap) == (after_rule.decision, after_rule.gap):
            continue
        set_in = next((r.name for r in reversed(between) if key in r.own_ops), b.name)
        ops.append(OpChange(key, before_rule, after_rule, set_in))
    return CatalogueDiff(a.name, b.name, tuple(gaps), tuple(ops))
