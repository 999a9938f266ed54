"""Which adapters would bridge a gap for one model at one release: the hint of a blocked run.

A hint that sends a user to an adapter that does not fit their model is worse than none
(``host-position-bias``, a T5 relative-position adapter, is no help for Llama's embedding gap).
:func:`bridges_for` therefore names an adapter only when its manifest lists the gap **and** its
implementation matches the model, and says where it stands:

- ``applied``: it is applied to this model and the gap still stopped it, so it does not cover
  this use of the gap (the note says where);
- ``available``: resolved at the release and matching, but not applied (the model reached the
  device without ``prepare``, e.g. created on it);
- ``not-resolved``: matching, but not applied at this release by the lifecycle (its status
  says why: ``out-of-range``, ``retired``, ...).

Adapters whose ``matches`` fails are skipped (a broken adapter is reported where it is
prepared, not in a hint). A generated op bridge lists a gap for the ops it bridges only: given
the blocked ``op``, it is named only when it bridges that op (``bridge-nll-loss-forward`` is no
help for a CTC loss, though both stop at gap ``loss``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spyre_adapters.lifecycle import Lifecycle
from spyre_adapters.preparation import applied

if TYPE_CHECKING:
    from torch import nn

    from spyre_adapters.registry import Registry
    from spyre_adapters.stacks import ReleaseLike

__all__ = ["Bridge", "bridges_for"]


@dataclass(frozen=True)
class Bridge:
    """One adapter that bridges the gap for the model (see the module docstring)."""

    name: str
    version: str
    state: str  # applied | available | not-resolved
    status: str  # lifecycle status at the release

    def describe(self, gap: str, release: str) -> str:
        who = f"adapter `{self.name}` {self.version}"
        if self.state == "applied":
            return (
                f"{who} is applied and bridges gap `{gap}`, but does not cover this use of it "
                "(report the model and the module path)"
            )
        if self.state == "available":
            return (
                f"{who} bridges gap `{gap}` for this model; it is applied when the model "
                f"is prepared (`spyre_adapters.prepare(model, stack={release!r})` or "
                "`model.to('spyre')` under pytest --spyre)"
            )
        return (
            f"{who} bridges gap `{gap}` for this model but is {self.status} at stack {release} "
            f"(see `spyre-adapters audit --stack {release}`)"
        )


def bridges_for(
    model: nn.Module | None,
    gap: str,
    release: str | os.PathLike[str] | ReleaseLike,
    registry: Registry,
    op: str | None = None,
) -> list[Bridge]:
    """The adapters that bridge ``gap`` (met at ``op``, an overload name such as
    ``"aten.nll_loss_forward.default"``, when known) for ``model`` at ``release`` (see the
    module docstring), by name; with no model, none can be said to match."""
    if model is None:
        return []
    done = {a.name: str(a.version) for a in applied(model)}
    lifecycle = Lifecycle(registry)
    found: list[Bridge] = []
    for name in sorted({m.name for m in registry.bridging(gap)}):
        if op is not None and not _bridges_op(registry, name, op):
            continue
        if name in done:
            found.append(Bridge(name, done[name], "applied", "applied"))
            continue
        row = lifecycle.status_for(name, release)  # only the adapters that bridge the gap
        if gap not in row.manifest.gaps:
            continue
        try:
            fits = bool(row.manifest.load().matches(model))
        except Exception:  # a broken matches() is that adapter's bug, reported on prepare
            continue
        if fits:
            state = "available" if row.applied else "not-resolved"
            found.append(Bridge(name, str(row.version), state, row.status.value))
    return found


def _bridges_op(registry: Registry, name: str, op: str) -> bool:
    """Whether adapter ``name`` can bridge a gap met at ``op``: any adapter that is not an op
    bridge, or an op bridge with a version that bridges ``op``."""
    versions = registry.versions(name)
    if not any(m.bridges for m in versions):
        return True
    return any(b.op == op for m in versions for b in m.bridges)
