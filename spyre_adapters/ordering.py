"""The order in which adapters are applied to a model.

A manifest may declare the adapters it must follow (``after = ["rope-rotation"]``: it builds
on what that adapter leaves in the model). :func:`application_order` sorts the adapters to
apply so that each one comes after every adapter it follows that is applied too, and
otherwise by ``order`` (lower first), then name: ``order`` is only the tie-break. A followed
adapter that is registered but not applied (it does not match the model, or is retired at the
release) does not hold the follower back. A name in ``after`` that no registered adapter has,
or declarations that form a cycle, raise :class:`~spyre_adapters.errors.AdapterOrderError`.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence

from spyre_adapters.errors import AdapterOrderError
from spyre_adapters.manifest import Manifest

__all__ = ["application_order"]


def application_order(manifests: Sequence[Manifest], registered: Collection[str]) -> list[Manifest]:
    """``manifests`` (one version per adapter name) in application order (module docstring);
    ``registered`` are the names of every registered adapter."""
    by_name = {m.name: m for m in manifests}
    for manifest in manifests:
        unknown = [name for name in manifest.after if name not in registered]
        if unknown:
            raise AdapterOrderError(manifest.label, unknown=unknown)
    waiting = {m.name: {n for n in m.after if n in by_name} for m in manifests}
    followers: dict[str, list[str]] = {name: [] for name in by_name}
    for name, before in waiting.items():
        for other in before:
            followers[other].append(name)
    ready = [(m.order, m.name) for m in manifests if not waiting[m.name]]
    heapq.heapify(ready)
    ordered: list[Manifest] = []
    while ready:
        _, name = heapq.heappop(ready)
        ordered.append(by_name[name])
        for follower in followers[name]:
            waiting[follower].discard(name)
            if not waiting[follower]:
                heapq.heappush(ready, (by_name[follower].order, follower))
    if len(ordered) < len(by_name):
        cycle = _cycle(waiting, by_name)
        raise AdapterOrderError(cycle[0], cycle=cycle)
    return ordered


def _cycle(waiting: dict[str, set[str]], by_name: dict[str, Manifest]) -> list[str]:
    """One cycle among the adapters still waiting, as ``name version`` labels."""
    start = min(name for name, before in waiting.items() if before)
    path = [start]
    while True:
        step = min(waiting[path[-1]])
        if step in path:
            loop = [*path[path.index(step) :], step]
            return [by_name[name].label for name in loop]
        path.append(step)
