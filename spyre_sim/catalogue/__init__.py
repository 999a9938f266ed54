"""The stack-release catalogue: which ATen ops a Spyre stack release lowers, and the state of
every gap at that release.

The catalogue is data (``spyre_sim/data/*.toml``, format in ``spyre_sim/data/README.md``),
parsed here into frozen dataclasses. Every release is a delta on its ``base``; loading merges
the deltas so that each :class:`Release` carries the full picture (every gap's state, every op
rule). Validation reports every problem of every file at once in one :class:`CatalogueError`.

Provenance (release-file schema 2): a release names the upstream torch-spyre state it
reproduces (:class:`Upstream`: a date range and known commits) and each delta line its evidence
(``OpRule.source``, ``Release.gap_sources``). :meth:`Catalogue.diff` says what changes between
two releases and who set it; :func:`resolve_upstream` maps an upstream version string
(``0.0.1+g<sha>``, ``release-2026-09-22``) to the release covering it.

Lookups are plain dict reads: :meth:`Release.op_rule` costs two ``dict.get`` calls, and the
built-in catalogue is parsed once per process (:func:`builtin_catalogue` is cached).

The package's modules, one concept each: the data model (``_model``), the catalogue and its
lookups (``_catalogue``), checking the values of one TOML file (``_reader``), reading the gaps
file (``_gaps_file``) and a release file (``_release_file``), loading and merging files
(``_loading``), upstream-version resolution (``_resolution``) and release diffs (``_diff``).
Import from ``spyre_sim.catalogue``; importing it does not import torch.
"""

from __future__ import annotations

from spyre_sim.catalogue._catalogue import Catalogue
from spyre_sim.catalogue._diff import CatalogueDiff, GapChange, OpChange
from spyre_sim.catalogue._loading import builtin_catalogue, catalogue_for, load_release_file
from spyre_sim.catalogue._model import (
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    UNLOWERED_GAP,
    Decision,
    Gap,
    GapNature,
    GapState,
    OpRule,
    Release,
    StackResolution,
    Upstream,
    UpstreamCommit,
    packet_of,
)
from spyre_sim.catalogue._resolution import resolve_stack, resolve_upstream

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "UNLOWERED_GAP",
    "Catalogue",
    "CatalogueDiff",
    "Decision",
    "Gap",
    "GapChange",
    "GapNature",
    "GapState",
    "OpChange",
    "OpRule",
    "Release",
    "StackResolution",
    "Upstream",
    "UpstreamCommit",
    "builtin_catalogue",
    "catalogue_for",
    "load_release_file",
    "packet_of",
    "resolve_stack",
    "resolve_upstream",
]
