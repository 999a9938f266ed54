"""The manifest data model: :class:`Manifest` (one adapter version), its :class:`AdapterKind`
and the :class:`Bridge` tables of a generated adapter, as :mod:`spyre_adapters.manifest` documents
them.

Built by the validation of :mod:`spyre_adapters._manifest_parse` (or in code); re-exported by
:mod:`spyre_adapters.manifest`, where other code imports them from.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from spyre_adapters._entry_points import import_entry_point
from spyre_adapters._locate import module_file

__all__ = [
    "BRIDGE_CANDIDATES",
    "CATCH_ALL_GAP",
    "DEFAULT_ORDER",
    "MANIFEST_SCHEMA_VERSION",
    "AdapterKind",
    "Bridge",
    "Manifest",
    "op_lowered",
]

#: The manifest format this version of the package reads and writes.
MANIFEST_SCHEMA_VERSION = 1
#: ``order`` of a manifest that does not set one.
DEFAULT_ORDER = 100
#: The candidate forms a bridge may name (``spyre_adapters.library.op_bridge_v3.CANDIDATES``:
#: the first form's and ``host-float32``).
BRIDGE_CANDIDATES = (
    "decomposition",
    "core-decomposition",
    "ref",
    "rewrite",
    "host",
    "host-float32",
)
#: The gap of an op that a release does not list: only the op's own rule names it.
CATCH_ALL_GAP = "unlowered-op"


class AdapterKind(enum.Enum):
    """``scaffolding`` bridges transitional gaps and retires; ``permanent`` bridges a lasting
    hardware property and never retires."""

    SCAFFOLDING = "scaffolding"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Bridge:
    """One ATen op a generated adapter bridges, with the evidence for its candidate.

    ``op`` is the overload (``"aten.histc.default"``), ``candidate`` the form chosen (one of
    :data:`BRIDGE_CANDIDATES`), ``gap`` the gap the op stops models at, ``releases`` the
    releases where the candidate was validated on the device against the CPU, ``checked``
    the inputs it was checked on (signatures and where they came from).
    """

    op: str
    candidate: str
    gap: str
    releases: tuple[str, ...]
    checked: tuple[str, ...]
    #: the release refused the op by a rule of its gap on top of the op's own rule (casts to
    #: fp32 before 2026.07: ``_to_copy`` lowers, the ``dtype-cast`` rule refuses some calls):
    #: derived on load, when a release the candidate was validated at lowers the op itself
    #: (never for :data:`CATCH_ALL_GAP`, which only an op's own rule names)
    by_rule: bool = False

    def lowered_at(self, release: Any) -> bool | None:
        """Whether ``release`` lowers the op (``native`` or ``decomposed``); ``None`` when the
        release object cannot say (it has no op rules) or when the op was refused by a rule of
        its gap rather than by its own rule (then the gap's state decides)."""
        if self.by_rule:
            return None
        return op_lowered(release, self.op)


def op_lowered(release: Any, op: str) -> bool | None:
    """Whether ``release``'s own rule for ``op`` (an overload name) runs it: ``native``,
    ``decomposed``, or a ``cpu-fallback`` (then the stack moves it to the host itself, as a
    host bridge would); ``None`` for a release object without op rules."""
    rule_of = getattr(release, "op_rule", None)
    if rule_of is None:
        return None
    packet, _, overload = op.rpartition(".")
    decision = rule_of(packet, overload).decision
    return str(getattr(decision, "value", decision)) in ("native", "decomposed", "cpu-fallback")


@dataclass(frozen=True)
class Manifest:
    """One adapter version, as declared by its manifest file.

    ``source`` is the file it was read from and ``sha256`` the hash of that file's bytes
    (both empty for a manifest built in code).
    """

    name: str
    version: Version
    kind: AdapterKind
    summary: str
    gaps: tuple[str, ...]
    families: tuple[str, ...]
    stacks: SpecifierSet
    entry_point: str
    retire_by: str | None = None
    order: int = DEFAULT_ORDER
    schema_version: int = MANIFEST_SCHEMA_VERSION
    source: str = ""
    sha256: str = ""
    generated: bool = False
    bridges: tuple[Bridge, ...] = ()
    after: tuple[str, ...] = ()  # adapters applied before this one (spyre_adapters.ordering)

    def open_gaps(self, release: Any) -> tuple[str, ...]:
        """The gaps of this adapter that are open at ``release`` (a release object with
        ``gap_open``). For an adapter with bridges, a gap counts as open only while some op
        bridged for it does not lower at the release (see :mod:`spyre_adapters.manifest`)."""
        gaps = [g for g in self.gaps if release.gap_open(g)]
        if not self.bridges:
            return tuple(gaps)
        still = []
        for gap in gaps:
            lowered = [b.lowered_at(release) for b in self.bridges if b.gap == gap]
            if not lowered or not all(lowered):
                still.append(gap)
        return tuple(still)

    @property
    def key(self) -> tuple[str, Version]:
        """``(name, version)``: unique in a registry."""
        return (self.name, self.version)

    @property
    def label(self) -> str:
        """``"name version"`` for messages."""
        return f"{self.name} {self.version}"

    def admits(self, release_version: Version) -> bool:
        """Whether the manifest's ``stacks`` specifier admits a release version."""
        return self.stacks.contains(release_version, prereleases=True)

    def load(self) -> Any:
        """Import and return the implementation named by ``entry_point``."""
        return import_entry_point(self.entry_point)

    def implementation_file(self) -> Path | None:
        """The source file of the entry point's module, when it has one."""
        return module_file(self.entry_point.partition(":")[0])
