"""prepare / restore / applied: atomic, idempotent, recorded, and lock-driven."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from torch import nn

from spyre_adapters import (
    AdapterApplyError,
    AdapterKind,
    AlreadyPreparedError,
    AppliedAdapter,
    LockError,
    Manifest,
    Registry,
    applied,
    pin,
    prepare,
    prepared_release,
    restore,
    write_lock,
)

from .conftest import FakeCatalogue


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.gate = nn.GELU()
        self.out = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.gate(self.act(self.fc(x))))


def manifest(name: str, entry: str, order: int) -> Manifest:
    return Manifest(
        name=name,
        version=Version("1.0"),
        kind=AdapterKind.SCAFFOLDING,
        summary=name,
        gaps=("rotate-half",),  # never closed: always active
        families=("tiny",),
        stacks=SpecifierSet(">=2025.12"),
        entry_point=f"spyre_fake_adapters:{entry}",
        order=order,
    )


def snapshot(model: nn.Module) -> tuple[object, ...]:
    modules = tuple((path, id(m), type(m).__name__) for path, m in model.named_modules())
    tags = tuple(m.__dict__.get("spyre_tag") for m in model.modules())
    return modules, tags


def test_prepare_applies_in_order_and_records(registry: Registry) -> None:
    model = Tiny()
    original_act = model.act
    x = torch.randn(2, 4)
    expected = model(x)
    result = prepare(model, "2026.08", registry=registry)
    assert result.release == "2026.08"
    assert result.applied == (
        AppliedAdapter("gamma", Version("1.0"), ("gate",)),
        AppliedAdapter("alpha", Version("2.0"), ("act",)),
        AppliedAdapter("beta", Version("1.0"), ("fc", "out")),
    )
    assert result.retired == ("delta",)
    assert applied(model) == list(result.applied)
    assert prepared_release(model) == "2026.08"
    assert type(model.act).__name__ == "Tagged"
    assert model.act.inner is original_act
    assert model.fc.spyre_tag == "a"
    torch.testing.assert_close(model(x), expected)


def test_restore_undoes_everything(registry: Registry) -> None:
    model = Tiny()
    before = snapshot(model)
    prepare(model, "2026.08", registry=registry)
    assert snapshot(model) != before
    undone = restore(model)
    assert [a.name for a in undone] == ["gamma", "alpha", "beta"]
    assert snapshot(model) == before
    assert applied(model) == []
    assert prepared_release(model) is None
    assert restore(model) == []


def test_prepare_twice_for_the_same_release_is_a_no_op(registry: Registry) -> None:
    model = Tiny()
    first = prepare(model, "2026.08", registry=registry)
    after_first = snapshot(model)
    assert prepare(model, "2026.08", registry=registry) is first
    assert snapshot(model) == after_first
    assert type(model.act.inner).__name__ == "ReLU"  # not wrapped twice


def test_prepare_for_another_release_needs_restore(registry: Registry) -> None:
    model = Tiny()
    prepare(model, "2026.08", registry=registry)
    with pytest.raises(AlreadyPreparedError) as info:
        prepare(model, "2026.09", registry=registry)
    assert str(info.value) == (
        "model is already prepared for stack 2026.08 (applied gamma 1.0, alpha 2.0, beta 1.0); "
        "preparing it for 2026.09 would stack two adapter sets: call "
        "spyre_adapters.restore(model) first"
    )
    restore(model)
    assert [a.name for a in prepare(model, "2026.09", registry=registry).applied] == ["beta"]


def test_the_resolution_follows_auto_retire_the_release_and_a_growing_registry(
    catalogue: FakeCatalogue,
) -> None:
    # prepare keeps each release's resolution; none of these may reuse another's
    reg = Registry(catalogue)
    reg.add(manifest("tagger", "tag_b", 2))
    for release in ("2026.05", "2026.06", "2026.05"):
        model = Tiny()
        assert [a.name for a in prepare(model, release, registry=reg).applied] == ["tagger"]
    reg.add(manifest("first", "tag_a", 1))
    model = Tiny()
    assert [a.name for a in prepare(model, "2026.05", registry=reg).applied] == [
        "first",
        "tagger",
    ]


def test_auto_retire_off_is_resolved_apart(registry: Registry) -> None:
    kept = prepare(Tiny(), "2026.08", registry=registry, auto_retire=False)
    retired = prepare(Tiny(), "2026.08", registry=registry)
    assert "delta" in [a.name for a in kept.applied]
    assert retired.retired == ("delta",)
    assert "delta" not in [a.name for a in retired.applied]


def test_a_failing_adapter_rolls_back_the_whole_prepare(catalogue: FakeCatalogue) -> None:
    reg = Registry(catalogue)
    reg.add_all(
        [
            manifest("first", "tag_a", 1),
            manifest("second", "relu", 2),
            manifest("third", "fails", 3),
            manifest("fourth", "gelu", 4),
        ]
    )
    model = Tiny()
    before = snapshot(model)
    with pytest.raises(AdapterApplyError) as info:
        prepare(model, "2026.05", registry=reg)
    error = info.value
    assert (error.adapter, error.version, error.stage) == ("third", "1.0", "apply")
    assert error.rolled_back == ["first", "second"]
    assert isinstance(error.__cause__, RuntimeError)
    assert str(error) == (
        "adapter 'third' 1.0 failed in apply(): RuntimeError: weights have an unexpected shape "
        "(64, 65); the model was restored to its state before prepare; rolled back first, "
        "second too"
    )
    assert snapshot(model) == before
    assert applied(model) == []


def test_matches_errors_and_non_matching_adapters(catalogue: FakeCatalogue) -> None:
    reg = Registry(catalogue)
    reg.add_all([manifest("quiet", "never", 1), manifest("tagger", "tag_b", 2)])
    model = Tiny()
    result = prepare(model, "2026.05", registry=reg)
    assert result.skipped == ("quiet",)
    assert [a.name for a in result.applied] == ["tagger"]
    restore(model)
    reg.add(manifest("nosy", "match_raises", 3))
    with pytest.raises(AdapterApplyError) as info:
        prepare(model, "2026.05", registry=reg)
    assert info.value.stage == "matches"
    assert info.value.rolled_back == ["tagger"]
    assert "spyre_tag" not in model.fc.__dict__


def test_consecutive_adapters_offering_apply_together_are_applied_with_one_call(
    catalogue: FakeCatalogue,
) -> None:
    from spyre_fake_adapters import Stamps

    reg = Registry(catalogue)
    reg.add_all(
        [
            manifest("stamp-one", "stamp_1", 300),
            manifest("stamp-two", "stamp_2", 301),
            manifest("tagger", "tag_b", 302),  # another class: ends the run
            manifest("stamp-three", "stamp_3", 303),
        ]
    )
    model = Tiny()
    Stamps.together_calls.clear()
    result = prepare(model, "2026.05", registry=reg)
    # the same model as applying each in turn, every adapter recorded on its own
    assert model.__dict__["spyre_stamps"] == ("1", "2", "3")
    assert [a.name for a in result.applied] == ["stamp-one", "stamp-two", "tagger", "stamp-three"]
    assert Stamps.together_calls == [2]  # a run of one is applied on its own
    restore(model)
    assert "spyre_stamps" not in model.__dict__


def test_a_run_that_fails_together_is_applied_one_by_one_and_names_the_adapter(
    catalogue: FakeCatalogue,
) -> None:
    reg = Registry(catalogue)
    reg.add_all(
        [
            manifest("tagger", "tag_b", 1),
            manifest("stamp-one", "stamp_1", 300),
            manifest("stamp-broken", "stamp_broken", 301),
            manifest("stamp-two", "stamp_2", 302),
        ]
    )
    model = Tiny()
    before = snapshot(model)
    with pytest.raises(AdapterApplyError) as info:
        prepare(model, "2026.05", registry=reg)
    assert (info.value.adapter, info.value.stage) == ("stamp-broken", "apply")
    assert info.value.rolled_back == ["tagger", "stamp-one"]
    assert "stamp x is broken" in str(info.value)
    assert snapshot(model) == before
    assert "spyre_stamps" not in model.__dict__


def test_a_matches_error_after_a_pending_run_names_the_run_as_rolled_back(
    catalogue: FakeCatalogue,
) -> None:
    reg = Registry(catalogue)
    reg.add_all(
        [
            manifest("stamp-one", "stamp_1", 300),
            manifest("stamp-two", "stamp_2", 301),
            manifest("nosy", "match_raises", 302),
        ]
    )
    model = Tiny()
    before = snapshot(model)
    with pytest.raises(AdapterApplyError) as info:
        prepare(model, "2026.05", registry=reg)
    assert (info.value.adapter, info.value.stage) == ("nosy", "matches")
    assert info.value.rolled_back == ["stamp-one", "stamp-two"]
    assert snapshot(model) == before
    assert "spyre_stamps" not in model.__dict__


def test_op_bridges_applied_together_mark_the_model_as_applying_each_in_turn() -> None:
    from spyre_adapters.contract import ModelEdit
    from spyre_adapters.library import _scoped_modes, op_bridge_v2

    bridges = [
        op_bridge_v2.OpBridge({"aten.isinf.default": "decomposition"}),
        op_bridge_v2.OpBridge({"aten.sort.default": "host"}),
    ]
    one_by_one, together = Tiny(), Tiny()
    for bridge in bridges:
        bridge.apply(one_by_one, ModelEdit(one_by_one))
    edit = ModelEdit(together)
    op_bridge_v2.OpBridge.apply_together(bridges, together, edit)
    marks = [_scoped_modes.enabled(m) for m in one_by_one.modules()]
    assert marks == [_scoped_modes.enabled(m) for m in together.modules()]
    assert marks[0][op_bridge_v2.KIND] == {
        ("aten.isinf.default", "decomposition"),
        ("aten.sort.default", "host"),
    }
    edit.rollback()
    assert not any(_scoped_modes.enabled(m) for m in together.modules())


def test_a_model_prepared_with_nothing_can_be_prepared_again(catalogue: FakeCatalogue) -> None:
    reg = Registry(catalogue)
    reg.add(manifest("quiet", "never", 1))
    model = Tiny()
    assert prepare(model, "2026.05", registry=reg).applied == ()
    assert prepare(model, "2026.06", registry=reg).release == "2026.06"


def test_prepare_with_a_lock_uses_exactly_the_pinned_set(
    registry: Registry, tmp_path: Path
) -> None:
    # pinned with auto-retirement off: alpha and delta stay although 2026.09 retires them
    path = tmp_path / "spyre-adapters.lock"
    write_lock(pin(registry, "2026.09", auto_retire=False), path)
    model = Tiny()
    result = prepare(model, "2026.09", lock=path, registry=registry)
    assert result.locked
    assert [a.name for a in result.applied] == ["gamma", "alpha", "beta", "delta"]
    restore(model)
    with pytest.raises(LockError, match=r"no adapters are pinned for stack 2026.08"):
        prepare(model, "2026.08", lock=str(path), registry=registry)
    assert applied(model) == []


def test_prepare_with_a_tampered_lock_fails_before_touching_the_model(
    registry: Registry, catalogue: FakeCatalogue
) -> None:
    lock = pin(registry, "2026.05")
    other = Registry(catalogue)
    for m in registry.manifests():
        other.add(m if m.name != "beta" else m.__class__(**{**m.__dict__, "sha256": "f" * 64}))
    model = Tiny()
    before = snapshot(model)
    with pytest.raises(LockError) as info:
        prepare(model, "2026.05", lock=lock, registry=other)
    assert [p.key for p in info.value.problems] == ['releases."2026.05" beta']
    assert snapshot(model) == before
