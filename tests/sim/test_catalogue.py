"""The built-in stack-release catalogue against the stack description (docs/STACK.md §5, §6, §8)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from spyre_sim.catalogue import (
    UNLOWERED_GAP,
    Catalogue,
    Decision,
    GapNature,
    OpRule,
    Release,
    builtin_catalogue,
)
from spyre_sim.errors import SpyreSimError

from .stack_expectations import (
    DECOMPOSED,
    DEVICE_OPS,
    FALLBACK,
    LAYOUT_OPS,
    NATIVE,
    SPYRE_DECISIONS,
    SPYRE_NATURES,
    TIMELINES,
    UNSUPPORTED,
    C,
    F,
    M,
    X,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

RELEASES = ("2025.12", "2026.02", "2026.03", "2026.05", "2026.06", "2026.07", "2026.08", "2026.09")
DATA = Path(__file__).resolve().parents[1] / "data" / "releases"
CENSUS = sorted(json.loads((DATA / "op-census-packets.json").read_text())["op_family_count"])
# op overloads Transformers' own model tests reach inside the model scope (forward, forward with
# labels, fp16 forward, greedy generate), written by benchmarks/collect_model_ops.py
MODEL_OPS = sorted(json.loads((DATA.parent / "model-ops.json").read_text())["op_overload_count"])


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return builtin_catalogue()


def test_releases_are_the_eight_of_the_stack_description_in_order(catalogue: Catalogue) -> None:
    assert catalogue.names == RELEASES
    assert [r.version for r in catalogue.releases] == [Version(n) for n in RELEASES]
    assert catalogue.newest.name == "2026.09"
    assert catalogue.releases[0].base is None
    for older, newer in zip(catalogue.releases, catalogue.releases[1:], strict=False):
        assert newer.base == older.name
        assert newer.date > older.date
        assert newer.summary
    for release in catalogue.releases:
        assert Path(release.source).name == f"{release.name}.toml"


def test_builtin_catalogue_is_parsed_once() -> None:
    assert builtin_catalogue() is builtin_catalogue()


def test_census_has_209_packets() -> None:
    assert len(CENSUS) == 209


@pytest.mark.parametrize("name", RELEASES)
def test_every_census_op_has_an_explicit_rule(catalogue: Catalogue, name: str) -> None:
    release = catalogue.release(name)
    missing = [op for op in CENSUS if op not in release.op_rules]
    assert missing == []
    # A census op placed with the catch-all says why.
    silent = [
        op
        for op in CENSUS
        if release.op_rules[op].gap == UNLOWERED_GAP and not release.op_rules[op].note
    ]
    assert silent == []


def test_model_ops_list_is_the_test_tree_collection() -> None:
    data = json.loads((DATA.parent / "model-ops.json").read_text())
    assert data["files"] > 400
    assert len(MODEL_OPS) > 200
    assert "collect_model_ops.py" in data["about"]
    # the ops the catalogue once left to the catch-all are among them
    assert {"aten.isinf.default", "aten.binary_cross_entropy_with_logits.default"} <= set(MODEL_OPS)


@pytest.mark.parametrize("name", RELEASES)
def test_every_model_op_of_the_test_tree_has_an_explicit_rule(
    catalogue: Catalogue, name: str
) -> None:
    release = catalogue.release(name)
    by_omission = []
    silent = []
    for op in MODEL_OPS:
        packet, _overload = op.rsplit(".", 1)
        key = op if op in release.op_rules else packet
        rule = release.op_rules.get(key)
        if rule is None:
            by_omission.append(op)  # would be unsupported under the catch-all unlowered-op
        elif rule.gap == UNLOWERED_GAP and not rule.note:
            silent.append(op)
    assert by_omission == []
    assert silent == []


@pytest.mark.parametrize(
    ("op", "gap"),
    [
        ("aten.isinf", "nan-inf-test"),
        ("aten.nll_loss_forward", "loss"),
        ("aten.nll_loss2d_forward", "loss"),
        ("aten._ctc_loss", "loss"),
        ("aten.linalg_cholesky_ex", "linalg"),
        ("aten.histc", "histc"),
        # Transformers 5.25's MoE router statistics (#4396: no eager kernel up to 2026.09)
        ("aten.scatter_add", "indirect-access"),
        ("aten.scatter_add_", "indirect-access"),
    ],
)
def test_ops_once_left_to_the_catch_all_name_a_real_gap(
    catalogue: Catalogue, op: str, gap: str
) -> None:
    for release in catalogue.releases:
        rule = release.op_rule(op)
        assert (rule.decision, rule.gap) == (UNSUPPORTED, gap), release.name
        assert rule.note


@pytest.mark.parametrize("name", RELEASES)
def test_device_ops_have_an_explicit_rule(catalogue: Catalogue, name: str) -> None:
    release = catalogue.release(name)
    assert [op for op in DEVICE_OPS if op not in release.op_rules] == []


@pytest.mark.parametrize("name", RELEASES)
def test_every_non_lowering_rule_names_a_known_gap(catalogue: Catalogue, name: str) -> None:
    release = catalogue.release(name)
    for op, rule in release.op_rules.items():
        if rule.decision in (NATIVE, DECOMPOSED):
            assert rule.gap is None, op
        else:
            assert rule.gap is not None, op
            assert rule.gap in catalogue.gaps, op
            assert release.gap_states[rule.gap] is not C, op


@pytest.mark.parametrize("op", LAYOUT_OPS)
def test_layout_ops_run_on_the_device_from_the_first_release(catalogue: Catalogue, op: str) -> None:
    for release in catalogue.releases:
        assert release.op_rule(op).decision in (NATIVE, DECOMPOSED), (op, release.name)


def test_allocation_and_transfers_never_fail(catalogue: Catalogue) -> None:
    first = catalogue.releases[0]
    for op in ("aten.empty", "aten.empty_strided", "aten._copy_from", "aten._copy_from_and_resize"):
        assert first.op_rule(op, "default").decision is NATIVE, op


@pytest.mark.parametrize(("op", "overload", "name", "decision"), SPYRE_DECISIONS)
def test_op_decisions_follow_the_stack_description(
    catalogue: Catalogue, op: str, overload: str, name: str, decision: Decision
) -> None:
    assert catalogue.release(name).op_rule(op, overload).decision is decision


def test_every_gap_of_spyre_md_is_defined_with_its_nature(catalogue: Catalogue) -> None:
    for gap_id, nature in SPYRE_NATURES.items():
        gap = catalogue.gaps[gap_id]
        assert gap.nature is nature, gap_id
        assert gap.title
        assert gap.description


def test_every_gap_has_a_state_in_every_release(catalogue: Catalogue) -> None:
    for release in catalogue.releases:
        assert set(release.gap_states) == set(catalogue.gaps), release.name


@pytest.mark.parametrize("gap_id", sorted(TIMELINES))
def test_gap_timeline(catalogue: Catalogue, gap_id: str) -> None:
    assert catalogue.timeline(gap_id) == list(zip(RELEASES, TIMELINES[gap_id], strict=True))


def test_lasting_gaps_are_never_closed(catalogue: Catalogue) -> None:
    lasting = [g for g in catalogue.gaps.values() if g.nature is GapNature.LASTING]
    assert {"stick-align", "no-inf", "fp32-storage"} <= {g.id for g in lasting}
    for gap in lasting:
        assert all(state is not C for _, state in catalogue.timeline(gap.id)), gap.id
        assert catalogue.first_closing(gap.id, "2025.12") is None


def test_mem_pool_is_a_regression_that_reopens_and_closes(catalogue: Catalogue) -> None:
    assert catalogue.gaps["mem-pool"].nature is GapNature.REGRESSION
    assert not catalogue.release("2026.07").gap_open("mem-pool")
    assert catalogue.release("2026.08").gap_open("mem-pool")
    assert not catalogue.release("2026.09").gap_open("mem-pool")
    assert catalogue.first_closing("mem-pool", "2026.08") == "2026.09"
    assert catalogue.first_closing("mem-pool", "2026.07") == "2026.07"


@pytest.mark.parametrize(
    ("gap_id", "at", "expected"),
    [
        ("sin-cos", "2025.12", "2026.09"),
        ("embedding", "2026.02", "2026.08"),
        ("dtype-cast", "2025.12", "2026.07"),
        ("dtype-cast", "2026.05", "2026.07"),
        ("offset-slice", "2026.03", "2026.06"),
        ("sdpa-gqa", "2026.04", "2026.05"),  # a version between releases
        ("sdpa", "2026.09", "2026.09"),
        ("pow", "2025.12", "2026.03"),
        ("rotate-half", "2025.12", None),
        ("cumsum", "2026.05", None),
        ("tril-triu", "2025.12", None),
    ],
)
def test_first_closing(catalogue: Catalogue, gap_id: str, at: str, expected: str | None) -> None:
    assert catalogue.first_closing(gap_id, at) == expected


def test_first_closing_rejects_unknown_gap_and_bad_version(catalogue: Catalogue) -> None:
    with pytest.raises(SpyreSimError, match=r"unknown gap id 'sin_cos'.*sin-cos"):
        catalogue.first_closing("sin_cos", "2025.12")
    with pytest.raises(SpyreSimError, match="not a version"):
        catalogue.first_closing("sin-cos", "latest")


def test_dtype_cast_op_lands_before_the_gap_closes(catalogue: Catalogue) -> None:
    for name in ("2026.05", "2026.06"):
        release = catalogue.release(name)
        assert release.op_rule("aten._to_copy").decision is NATIVE
        assert release.gap_state("dtype-cast") is X
    assert not catalogue.release("2026.07").gap_open("dtype-cast")


def test_overload_rule_beats_packet_rule(catalogue: Catalogue) -> None:
    first = catalogue.release("2025.12")
    assert first.op_rule("aten.max", "default").decision is NATIVE
    dim = first.op_rule("aten.max", "dim")
    assert (dim.decision, dim.gap) == (UNSUPPORTED, "argmax")
    assert catalogue.release("2026.05").op_rule("aten.max", "dim").decision is FALLBACK
    assert first.op_rule("aten.max", "other").gap == "max-ops"


def test_unknown_op_is_unsupported_under_the_catch_all(catalogue: Catalogue) -> None:
    rule = catalogue.newest.op_rule("aten.frobnicate", "default")
    assert rule.decision is UNSUPPORTED
    assert rule.gap == UNLOWERED_GAP
    assert catalogue.gaps[UNLOWERED_GAP].nature is GapNature.TRANSITIONAL


def test_gap_ops_are_known_ops(catalogue: Catalogue) -> None:
    newest = catalogue.newest
    for gap in catalogue.gaps.values():
        unknown = [op for op in gap.ops if op not in newest.op_rules]
        assert unknown == [], gap.id


def test_release_lookup(catalogue: Catalogue) -> None:
    assert catalogue.release("2026.05") is catalogue.release("2026.5")
    assert "2026.05" in catalogue
    with pytest.raises(SpyreSimError) as info:
        catalogue.release("2026.04")
    message = str(info.value)
    assert "'2026.04'" in message
    for name in RELEASES:
        assert name in message


def test_gap_state_of_unknown_gap_names_the_known_ones(catalogue: Catalogue) -> None:
    with pytest.raises(SpyreSimError, match=r"unknown gap id 'nope'.*mem-pool"):
        catalogue.newest.gap_state("nope")


def test_release_is_frozen_and_hashable(catalogue: Catalogue) -> None:
    release: Release = catalogue.newest
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        release.op_rules["aten.sin"] = OpRule(NATIVE, None)  # type: ignore[index]
    assert {release: 1}[catalogue.release("2026.09")] == 1
    assert catalogue.release("2026.08") != release


def test_release_files_are_deltas_that_change_something(catalogue: Catalogue) -> None:
    for release in catalogue.releases[1:]:
        assert release.base is not None
        base = catalogue.release(release.base)
        raw = tomllib.loads(Path(release.source).read_text())
        for op in raw.get("ops", {}):
            before, after = base.op_rule(op), release.op_rules[op]
            assert (before.decision, before.gap) != (after.decision, after.gap), (release.name, op)
        for gap_id in raw.get("gaps", {}):
            assert base.gap_states[gap_id] is not release.gap_states[gap_id], (release.name, gap_id)


@pytest.mark.parametrize(
    ("op", "overload", "at", "running", "lowering"),
    [
        ("aten.embedding", "default", "2025.12", "2026.02", "2026.08"),
        ("aten.gather", "default", "2025.12", "2026.06", None),
        ("aten.sin", "default", "2025.12", "2025.12", "2026.09"),
        ("aten.cumsum", "default", "2026.03", "2026.05", None),
        ("aten.max", "dim", "2025.12", "2026.05", None),
        ("aten.max", "default", "2025.12", "2025.12", "2025.12"),
        ("aten.sort", "default", "2025.12", None, None),
        ("aten.frobnicate", "default", "2025.12", None, None),
    ],
)
def test_first_running_and_first_lowering(
    catalogue: Catalogue, op: str, overload: str, at: str, running: str | None, lowering: str | None
) -> None:
    assert catalogue.first_running(op, at, overload) == running
    assert catalogue.first_lowering(op, at, overload) == lowering


def test_op_timeline(catalogue: Catalogue) -> None:
    timeline = catalogue.op_timeline("aten.embedding")
    assert [name for name, _ in timeline] == list(RELEASES)
    assert [rule.decision for _, rule in timeline] == [UNSUPPORTED] + [FALLBACK] * 5 + [NATIVE] * 2


def test_gap_changes_say_what_a_release_closes_and_reopens(catalogue: Catalogue) -> None:
    assert catalogue.gap_changes("2026.09") == {
        "sin-cos": (F, C),
        "any-all": (F, C),
        "gemma-rmsnorm": (X, C),
        "mem-pool": (M, C),
        "sdpa-strided": (M, C),
        "offset-view-input": (M, C),
        "pow-exponent": (X, C),
        "pow-cube": (M, C),
    }
    assert catalogue.gap_changes("2026.08")["mem-pool"] == (C, M)
    first = catalogue.gap_changes("2025.12")
    assert set(first) == set(catalogue.gaps)
    assert all(old is None for old, _ in first.values())


def test_decision_and_gap_helpers(catalogue: Catalogue) -> None:
    assert [d for d in Decision if d.runs_on_device] == [
        NATIVE,
        DECOMPOSED,
        Decision.MISCOMPILED,
    ]
    assert catalogue.gaps["stick-align"].lasting
    assert not catalogue.gaps["sin-cos"].lasting
    assert [r.name for r in catalogue] == list(RELEASES)


# --------------------------------------------------------------------- provenance


def test_every_release_says_which_upstream_state_it_reproduces(catalogue: Catalogue) -> None:
    previous: Release | None = None
    for release in catalogue.releases:
        upstream = release.upstream
        assert upstream is not None, release.name
        assert upstream.end == release.date
        assert upstream.start <= upstream.end
        if previous is not None:
            assert previous.upstream is not None
            # the ranges tile the upstream history without gap or overlap
            assert (upstream.start - previous.upstream.end).days == 1, release.name
        for commit in upstream.commits:
            assert upstream.covers(commit.date)
            assert commit.source
        previous = release


def test_every_delta_line_names_its_source(catalogue: Catalogue) -> None:
    for release in catalogue.releases[1:]:
        assert release.own_gaps or release.own_ops, release.name
        silent_gaps = [g for g in sorted(release.own_gaps) if not release.gap_sources.get(g)]
        silent_ops = [o for o in sorted(release.own_ops) if not release.op_rules[o].source]
        assert (release.name, silent_gaps, silent_ops) == (release.name, [], [])
        assert release.delta_sources


def test_sources_are_upstream_numbers_or_sections_of_the_stack_doc(catalogue: Catalogue) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "STACK.md").read_text()
    sections = {line.split()[1].rstrip(".") for line in doc.splitlines() if line.startswith("## ")}
    for release in catalogue.releases:
        for source in release.delta_sources:
            if source.startswith("docs/STACK.md §"):
                assert source.split("§")[1] in sections, (release.name, source)
            else:
                assert source.startswith("#") or "/" in source.split("#")[0], source


def test_commits_resolve_to_the_release_that_lists_them(catalogue: Catalogue) -> None:
    for release in catalogue.releases:
        assert release.upstream is not None
        for commit in release.upstream.commits:
            found = catalogue.commit(commit.sha[:7])
            assert found is not None
            assert found[0] is release


def test_covering_maps_every_day_of_a_range_to_its_release(catalogue: Catalogue) -> None:
    for release in catalogue.releases:
        assert release.upstream is not None
        assert catalogue.covering(release.upstream.start) is release
        assert catalogue.covering(release.upstream.end) is release
    newest = catalogue.newest.upstream
    assert newest is not None
    assert catalogue.covering(newest.end + datetime.timedelta(days=1)) is None


def test_diff_names_each_change_with_the_release_and_evidence_behind_it(
    catalogue: Catalogue,
) -> None:
    diff = catalogue.diff("2026.08", "2026.09")
    gaps = {c.gap: c for c in diff.gaps}
    assert set(gaps) == set(catalogue.gap_changes("2026.09"))
    assert gaps["pow-cube"].before is M
    assert gaps["pow-cube"].after is C
    assert "#4479" in gaps["pow-cube"].source
    ops = {c.op: c for c in diff.ops}
    assert ops["aten.sin"].before.decision is FALLBACK
    assert ops["aten.sin"].after.decision is NATIVE
    assert "#4287" in ops["aten.sin"].after.source
    assert "aten.triu" not in ops  # still a fallback at 2026.09
    gone = {getattr(c, "gap", None) for c in diff.miscompiles if c.miscompile == "goes"}
    assert {"mem-pool", "pow-cube", "sdpa-strided", "offset-view-input"} <= gone


def test_diff_over_several_releases_names_the_release_that_set_each_value(
    catalogue: Catalogue,
) -> None:
    diff = catalogue.diff("2026.05", "2026.09")
    gaps = {c.gap: c for c in diff.gaps}
    assert gaps["embedding"].set_in == "2026.08"
    assert gaps["sin-cos"].set_in == "2026.09"
    assert "mem-pool" not in gaps  # closed at both ends
    appears = {getattr(c, "gap", None) for c in catalogue.diff("2026.07", "2026.08").miscompiles}
    assert "mem-pool" in appears


def test_diff_goes_from_old_to_new(catalogue: Catalogue) -> None:
    with pytest.raises(
        SpyreSimError, match=r"older release to a newer one.*--diff 2026.08 2026.09"
    ):
        catalogue.diff("2026.09", "2026.08")
