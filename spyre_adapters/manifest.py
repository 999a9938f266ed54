"""Adapter manifests: one TOML file per adapter version, parsed into a frozen :class:`Manifest`.

A manifest says what an adapter bridges and where it may run; the implementation (named by
``entry_point``) only says whether it matches a model and how to change it. The keys are
documented with a worked example in ``manifests/README.md``; in short::

    schema_version = 1
    name = "rope-rotation"
    version = "1.0"
    kind = "scaffolding"              # or "permanent"
    summary = "RoPE as precomputed rotation matrices (no sin/cos, no slicing on device)"
    gaps = ["sin-cos", "rotate-half"]
    families = ["llama", "mistral"]
    stacks = ">=2025.12"              # packaging specifier over release versions
    retire_by = "2026.09"             # optional: keeping it after this release is an error
    entry_point = "spyre_adapters.library.rope:adapter"
    order = 50                        # optional, default 100: lower is applied first

An adapter written by ``spyre-adapters bridge`` says so and carries its evidence: one table
per ATen op it bridges (the op's gap, the candidate chosen, the releases where the candidate
was validated on the device against the CPU, and the inputs it was checked on)::

    generated = true                  # optional, default false
    [bridges."aten.histc.default"]
    candidate = "rewrite"             # decomposition | core-decomposition | ref | rewrite | host
    gap = "histc"                     # one of ``gaps``
    releases = ["2026.05", "2026.09"] # validated at (each admitted by ``stacks``)
    checked = ["float16[16] bins=4 min=0 max=3 (olmoe, captured)", "..."]

The lifecycle reads such an adapter's gaps through its ops (:meth:`Manifest.open_gaps`): a
bridge is needed at a release only while the release does not run one of its ops (lowered, or
moved to the host by the stack itself), so it retires as soon as a release runs them, even
when the op's gap (say the catch-all ``unlowered-op``) stays open for other ops. An op the
release refused by a rule of its gap on top of the op's own rule (casts to fp32 before
2026.07) retires with the gap's state instead.

Validation is complete, not first-error: :func:`load_manifests` collects every problem of every
file (unknown keys, wrong types, bad versions and specifiers, unknown gap ids, kind that does not
fit the gaps, an entry point that does not import or is not an adapter, an unknown ``retire_by``,
a ``stacks`` range that admits no release at all, a file outside the ``<name>/<version>.toml``
layout of a manifests tree) and raises one :class:`~spyre_adapters.errors.ManifestError` listing
them with file and key.

This module is the public face of manifests; the work is done by one module per concept: the
data model (:mod:`spyre_adapters._manifest_model`), the validation of one document
(:mod:`spyre_adapters._manifest_parse`), loading files and trees
(:mod:`spyre_adapters._manifest_files`) and entry points (:mod:`spyre_adapters._entry_points`).
"""

from __future__ import annotations

from spyre_adapters._manifest_files import load_manifest, load_manifests
from spyre_adapters._manifest_model import (
    BRIDGE_CANDIDATES,
    DEFAULT_ORDER,
    MANIFEST_SCHEMA_VERSION,
    AdapterKind,
    Bridge,
    Manifest,
    op_lowered,
)
from spyre_adapters._manifest_model import CATCH_ALL_GAP as CATCH_ALL_GAP
from spyre_adapters._manifest_parse import parse_manifest

__all__ = [
    "BRIDGE_CANDIDATES",
    "Bridge",
    "DEFAULT_ORDER",
    "MANIFEST_SCHEMA_VERSION",
    "AdapterKind",
    "Manifest",
    "load_manifest",
    "load_manifests",
    "op_lowered",
    "parse_manifest",
]
