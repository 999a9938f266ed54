"""Property: random manifests and releases never crash the lifecycle manager.

Every generated manifest document either validates (and then gets exactly one status at any
release, consistent with its fields) or is rejected with problems naming the file; nothing else.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from spyre_adapters import AdapterKind, DuplicateAdapterError, Lifecycle, Registry, Status
from spyre_adapters.manifest import parse_manifest

from .conftest import GAPS, RELEASES, FakeRelease, make_catalogue

CATALOGUE = make_catalogue()

junk = st.one_of(
    st.none(), st.integers(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5)
)
names = st.one_of(st.sampled_from(["rope", "rms-norm", "a1", "x-y-z"]), junk, st.just("Bad_Name"))
versions = st.one_of(st.sampled_from(["1.0", "2.0.post1", "0.1a1", "1!2.0", "3"]), junk)
kinds = st.one_of(st.sampled_from(["scaffolding", "permanent"]), junk)
gap_ids = st.sampled_from([*GAPS, "warp-drive", "sin-coss", ""])
gap_lists = st.one_of(st.lists(gap_ids, max_size=4), junk, st.lists(junk, max_size=2))
specifiers = st.one_of(
    st.sampled_from(
        [
            ">=2025.12",
            "<2026.05",
            "==2026.08",
            ">=2026.03,<2026.07",
            "~=2026.5",
            "!=2026.06",
            "",
            ">>1",
            "bogus",
        ]
    ),
    junk,
)
retire_bys = st.one_of(st.sampled_from([*RELEASES, "2027.01"]), junk)
entry_points = st.one_of(
    st.sampled_from(
        [
            "spyre_fake_adapters:relu",
            "spyre_fake_adapters:not_an_adapter",
            "spyre_fake_broken_import:adapter",
            "spyre_fake_adapters:missing",
            "no_such_module_anywhere:adapter",
            "not an entry point",
        ]
    ),
    junk,
)
orders = st.one_of(st.integers(-1000, 1000), junk)
OPTIONAL = {
    "schema_version": st.one_of(st.just(1), st.integers(0, 3), junk),
    "name": names,
    "version": versions,
    "kind": kinds,
    "summary": st.one_of(st.text(min_size=1, max_size=10), junk),
    "gaps": gap_lists,
    "families": st.one_of(st.lists(st.sampled_from(["llama", "gpt2"]), max_size=2), junk),
    "stacks": specifiers,
    "retire_by": retire_bys,
    "entry_point": entry_points,
    "order": orders,
    "colour": junk,
}


VALID = {
    "schema_version": st.just(1),
    "name": st.sampled_from(["rope", "rms-norm", "a1", "x-y-z"]),
    "version": st.sampled_from(["1.0", "2.0.post1", "0.1a1", "1!2.0", "3"]),
    "kind": st.just("scaffolding"),
    "summary": st.text(min_size=1, max_size=10).filter(str.strip),
    "gaps": st.lists(
        st.sampled_from([g for g, (n, _) in GAPS.items() if n != "lasting"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    "families": st.lists(st.sampled_from(["llama", "gpt2"]), max_size=2, unique=True),
    "stacks": st.sampled_from(
        [">=2025.12", "<2026.05", "==2026.08", ">=2026.03,<2026.07", "~=2026.5", "!=2026.06", ""]
    ),
    "entry_point": st.just("spyre_fake_adapters:relu"),
}
LASTING = [g for g, (n, _) in GAPS.items() if n == "lasting"]


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly valid documents (so the lifecycle sees many), with 0-3 keys broken or dropped."""
    doc = {key: draw(strategy) for key, strategy in VALID.items()}
    if draw(st.booleans()):  # a permanent adapter bridges a lasting gap
        doc["kind"] = "permanent"
        doc["gaps"] = [*doc["gaps"][:1], draw(st.sampled_from(LASTING))]
    elif draw(st.booleans()):
        doc["retire_by"] = draw(st.sampled_from(RELEASES))
    if draw(st.booleans()):
        doc["order"] = draw(st.integers(-1000, 1000))
    for key in draw(st.lists(st.sampled_from(sorted(OPTIONAL)), max_size=3)):
        if draw(st.booleans()):
            doc[key] = draw(OPTIONAL[key])
        else:
            doc.pop(key, None)
    return doc


releases = st.one_of(
    st.sampled_from(CATALOGUE.releases),
    st.builds(
        FakeRelease,
        name=st.builds(lambda y, m: f"{y}.{m:02d}", st.integers(2024, 2028), st.integers(1, 12)),
        open_gaps=st.frozensets(st.sampled_from(list(GAPS))),
    ),
)


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(documents(), min_size=1, max_size=4), release=releases)
def test_random_manifests_get_a_status_or_a_clear_error(
    docs: list[dict[str, Any]], release: FakeRelease
) -> None:
    registry = Registry(CATALOGUE)
    for index, doc in enumerate(docs):
        where = f"random-{index}.toml"
        manifest, problems = parse_manifest(doc, where=where, catalogue=CATALOGUE)
        if manifest is None:
            assert problems
            assert all(p.where == where and p.key and p.message for p in problems)
            continue
        assert problems == []
        if manifest.key in {m.key for m in registry}:
            with pytest.raises(DuplicateAdapterError):
                registry.add(manifest, source=where)
        else:
            registry.add(manifest, source=where)
    lifecycle = Lifecycle(registry, today=None, auto_retire=True)
    rows = lifecycle.status_at(release)
    assert [r.name for r in rows] == registry.names()
    for row in rows:
        manifest = row.manifest
        assert row.applied == (row.status not in (Status.RETIRED, Status.OUT_OF_RANGE))
        assert (row.status is Status.OUT_OF_RANGE) == (not manifest.admits(release.version))
        if manifest.kind is AdapterKind.PERMANENT:
            assert row.status in (Status.PERMANENT, Status.OUT_OF_RANGE)
        if row.retirable_in is not None:
            assert Version(row.retirable_in) >= release.version
        assert row.reason
    resolved = lifecycle.resolve(release)
    assert [(m.order, m.name) for m in resolved] == sorted((m.order, m.name) for m in resolved)
