"""Declared dependencies between adapters (``after``): parsed, ordered, refused when wrong."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spyre_adapters import AdapterOrderError, build_registry
from spyre_adapters.manifest import Manifest, parse_manifest
from spyre_adapters.ordering import application_order
from spyre_adapters.stacks import default_catalogue

DATA: dict[str, Any] = {
    "schema_version": 1,
    "name": "head-fix",
    "version": "0.1.0",
    "kind": "permanent",
    "summary": "test",
    "gaps": ["sub-stick-head"],
    "families": [],
    "stacks": ">=2025.12",
    "entry_point": "my_adapters.head_fix:adapter",
}


def parse(**extra: Any) -> tuple[Manifest | None, list[str]]:
    manifest, problems = parse_manifest(
        {**DATA, **extra}, where="m.toml", catalogue=default_catalogue(), check_entry_point=False
    )
    return manifest, [f"{p.key}: {p.message}" for p in problems]


def test_after_is_optional_and_parsed() -> None:
    manifest, problems = parse()
    assert problems == []
    assert manifest is not None
    assert manifest.after == ()
    manifest, problems = parse(after=["rope-rotation"])
    assert problems == []
    assert manifest is not None
    assert manifest.after == ("rope-rotation",)


def test_after_problems_are_reported() -> None:
    _, problems = parse(after="rope-rotation")
    assert len(problems) == 1
    assert problems[0].startswith("after: expected a list of strings")
    _, problems = parse(after=["Rope_Rotation", "head-fix"])
    assert problems == [
        "after: 'Rope_Rotation' is not a valid adapter name; list the adapters applied before it",
        "after: 'head-fix' is the adapter itself; list the adapters applied before it",
    ]


def _manifests() -> dict[str, Manifest]:
    registry = build_registry()
    return {m.name: m for m in registry.manifests()}


def _as(base: Manifest, name: str, order: int, after: tuple[str, ...] = ()) -> Manifest:
    return dataclasses.replace(base, name=name, order=order, after=after)


def test_after_beats_order_and_order_breaks_ties() -> None:
    base = next(iter(_manifests().values()))
    a = _as(base, "a", 10, after=("c",))  # lower order, but must follow c
    b = _as(base, "b", 20)
    c = _as(base, "c", 30)
    d = _as(base, "d", 5)
    ordered = application_order([a, b, c, d], {"a", "b", "c", "d"})
    assert [m.name for m in ordered] == ["d", "b", "c", "a"]
    # without declarations: order, then name
    plain = [_as(base, n, o) for n, o in (("z", 1), ("y", 1), ("x", 0))]
    assert [m.name for m in application_order(plain, {"x", "y", "z"})] == ["x", "y", "z"]


def test_a_followed_adapter_that_is_not_applied_holds_nothing_back() -> None:
    base = next(iter(_manifests().values()))
    a = _as(base, "a", 10, after=("c",))
    assert application_order([a], {"a", "c"}) == [a]


def test_unknown_names_and_cycles_are_refused() -> None:
    base = next(iter(_manifests().values()))
    a = _as(base, "a", 10, after=("nope",))
    with pytest.raises(AdapterOrderError, match="must follow 'nope'") as unknown:
        application_order([a], {"a"})
    assert unknown.value.unknown == ("nope",)
    x = _as(base, "x", 1, after=("y",))
    y = _as(base, "y", 2, after=("z",))
    z = _as(base, "z", 3, after=("x",))
    with pytest.raises(AdapterOrderError, match="form a cycle") as cycle:
        application_order([x, y, z], {"x", "y", "z"})
    names = [label.split(" ")[0] for label in cycle.value.cycle]
    assert names[0] == names[-1]
    assert set(names) == {"x", "y", "z"}


def test_builtins_order_as_before() -> None:
    """No built-in declares ``after`` yet: the order of every release is ``order``, then name."""
    from spyre_adapters import Lifecycle

    registry = build_registry()
    lifecycle = Lifecycle(registry)
    for release in registry.catalogue.releases:
        chosen = lifecycle.resolve(release.name)
        assert chosen == sorted(chosen, key=lambda m: (m.order, m.name))
