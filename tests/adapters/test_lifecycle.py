"""The lifecycle at every release of the (fake) catalogue, resolution, waivers.

Expected statuses are read off docs/STACK.md §5-6 (see conftest): sin-cos closes in 2026.09,
pow in 2026.03, dtype-cast in 2026.07, mem-pool is open only in 2026.08, stick-align is lasting.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from spyre_adapters import Lifecycle, Registry, Status, Waiver, WaiverError, load_waivers, status_at
from spyre_adapters.errors import UnknownReleaseError

from .conftest import DATA, RELEASES, FakeCatalogue

A, P, R, RB, OUT, OD = (
    Status.ACTIVE,
    Status.PERMANENT,
    Status.RETIRED,
    Status.RETIRABLE,
    Status.OUT_OF_RANGE,
    Status.OVERDUE,
)

#: release -> (alpha, beta, delta, gamma), auto-retire on
AUTO = {
    "2025.12": ((A, "1.0"), P, A, R),
    "2026.02": ((A, "1.0"), P, A, R),
    "2026.03": ((A, "1.0"), P, A, R),
    "2026.05": ((A, "2.0"), P, A, R),
    "2026.06": ((A, "2.0"), P, OD, R),
    "2026.07": ((A, "2.0"), P, R, R),
    "2026.08": ((A, "2.0"), P, R, A),
    "2026.09": ((R, "2.0"), P, R, R),
}


@pytest.mark.parametrize("release", RELEASES)
def test_status_table_across_releases(registry: Registry, release: str, today: _dt.date) -> None:
    rows = Lifecycle(registry, today=today).status_at(release)
    (alpha_status, alpha_version), beta, delta, gamma = AUTO[release]
    assert [(r.name, r.status) for r in rows] == [
        ("alpha", alpha_status),
        ("beta", beta),
        ("delta", delta),
        ("gamma", gamma),
    ]
    assert str(rows[0].version) == alpha_version
    assert all(r.release == release for r in rows)


def test_regression_brings_the_adapter_back_and_retires_it_again(
    registry: Registry, today: _dt.date
) -> None:
    lifecycle = Lifecycle(registry, today=today)
    gamma = [row.status for row in lifecycle.timeline("gamma")]
    assert gamma == [R, R, R, R, R, R, A, R]
    at_08 = lifecycle.status_at("2026.08")[3]
    assert at_08.open_gaps == ("mem-pool",)
    assert at_08.reason == "gap still open: mem-pool"
    assert at_08.retirable_in == "2026.09"
    assert [m.name for m in lifecycle.resolve("2026.08")] == ["gamma", "alpha", "beta"]
    assert [m.name for m in lifecycle.resolve("2026.07")] == ["alpha", "beta"]


def test_retirable_in_is_the_first_release_closing_every_gap(
    registry: Registry, today: _dt.date
) -> None:
    rows = {r.name: r for r in Lifecycle(registry, today=today).status_at("2025.12")}
    assert rows["alpha"].retirable_in == "2026.09"
    assert rows["delta"].retirable_in == "2026.07"  # pow 2026.03, dtype-cast 2026.07
    assert rows["gamma"].retirable_in == "2025.12"
    assert rows["beta"].retirable_in is None


def test_auto_retire_off_keeps_retirable_scaffolding(registry: Registry, today: _dt.date) -> None:
    lifecycle = Lifecycle(registry, today=today, auto_retire=False)
    rows = {r.name: r for r in lifecycle.status_at("2026.09")}
    assert rows["alpha"].status is RB
    assert rows["alpha"].applied
    assert rows["alpha"].reason == "every gap closed: sin-cos; kept (auto-retire off)"
    assert rows["delta"].status is OD  # kept past retire_by 2026.05
    assert [m.name for m in lifecycle.resolve("2026.09")] == ["gamma", "alpha", "beta", "delta"]
    assert [m.name for m in Lifecycle(registry, today=today).resolve("2026.09")] == ["beta"]


def test_resolution_picks_the_highest_admitted_version(registry: Registry, today: _dt.date) -> None:
    lifecycle = Lifecycle(registry, today=today)
    assert str(lifecycle.resolve_version("alpha", "2026.03").version) == "1.0"  # type: ignore[union-attr]
    assert str(lifecycle.resolve_version("alpha", "2026.05").version) == "2.0"  # type: ignore[union-attr]
    # a third version admitting everything wins everywhere
    alpha3 = dataclasses.replace(
        registry.get("alpha"), version=Version("3.0.dev1"), stacks=SpecifierSet(">=2025.12")
    )
    registry.add(alpha3, source="test")
    assert {str(lifecycle.resolve_version("alpha", r).version) for r in RELEASES} == {"3.0.dev1"}  # type: ignore[union-attr]


def test_out_of_range_when_no_version_admits_the_release(
    catalogue: FakeCatalogue, registry: Registry, today: _dt.date
) -> None:
    only_old = Registry(catalogue)
    only_old.add(registry.get("alpha", "1.0"))
    row = Lifecycle(only_old, today=today).status_at("2026.05")[0]
    assert row.status is OUT
    assert not row.applied
    assert row.reason == "stacks '<2026.05,>=2025.12' does not admit 2026.05"
    assert Lifecycle(only_old, today=today).resolve("2026.05") == []


def test_diff_between_two_releases(registry: Registry, today: _dt.date) -> None:
    changes = Lifecycle(registry, today=today).diff("2026.03", "2026.08")
    summary = [
        (
            c.name,
            c.before and (c.before.status, str(c.before.version)),
            c.after and (c.after.status, str(c.after.version)),
        )
        for c in changes
    ]
    assert summary == [
        ("alpha", (A, "1.0"), (A, "2.0")),
        ("delta", (A, "1.0"), (R, "1.0")),
        ("gamma", (R, "1.0"), (A, "1.0")),
    ]


def test_release_names_compare_as_versions(registry: Registry, today: _dt.date) -> None:
    lifecycle = Lifecycle(registry, today=today)
    assert lifecycle.release("2026.5").name == "2026.05"
    assert lifecycle.status_at("2026.8") == lifecycle.status_at("2026.08")


def test_unknown_release_lists_the_known_ones(registry: Registry) -> None:
    with pytest.raises(UnknownReleaseError) as info:
        status_at(registry, "2026.04")
    assert str(info.value) == (
        "unknown stack release '2026.04': expected one of "
        + ", ".join(RELEASES)
        + " or a path to a release TOML file"
    )


# -- waivers ---------------------------------------------------------------------------------------
WAIVER = Waiver("delta", "RMSNorm upcast lands in 2026.07", _dt.date(2026, 12, 31))


def test_waiver_keeps_an_overdue_adapter_until_it_expires(registry: Registry) -> None:
    held = Lifecycle(registry, waivers=[WAIVER], today=_dt.date(2026, 12, 31))
    row = held.status_at("2026.06")[2]
    assert row.status is A
    assert row.waiver == WAIVER
    assert row.reason == (
        "gap still open: dtype-cast; past retire_by 2026.05, waived until 2026-12-31: "
        "RMSNorm upcast lands in 2026.07"
    )
    expired = Lifecycle(registry, waivers=[WAIVER], today=_dt.date(2027, 1, 1))
    row = expired.status_at("2026.06")[2]
    assert row.status is OD
    assert row.reason == (
        "2026.06 is past retire_by 2026.05; waiver expired on 2026-12-31; gap still open: "
        "dtype-cast"
    )


def test_waiver_for_other_versions_does_not_apply(registry: Registry, today: _dt.date) -> None:
    other = dataclasses.replace(WAIVER, versions=SpecifierSet(">=2"))
    row = Lifecycle(registry, waivers=[other], today=today).status_at("2026.06")[2]
    assert row.status is OD
    assert row.waiver is None


def test_waivers_file(tmp_path: Path) -> None:
    path = tmp_path / "waivers.toml"
    path.write_text(
        'schema_version = 1\n[[waiver]]\nadapter = "delta"\nversions = "<2"\n'
        'reason = "needs the July stack"\nexpires = 2026-12-31\n'
    )
    (waiver,) = load_waivers(path)
    assert waiver == Waiver(
        "delta", "needs the July stack", _dt.date(2026, 12, 31), SpecifierSet("<2")
    )


def test_broken_waivers_file_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "waivers.toml"
    path.write_text(
        'schema_version = 1\nowner = "me"\n[[waiver]]\nadapter = "delta"\nreason = " "\n'
        'expires = "soon"\nversions = "two"\nticket = 3\n'
    )
    with pytest.raises(WaiverError) as info:
        load_waivers(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}: owner: unknown key (expected schema_version, waiver)",
        f"{path}: waiver[0].ticket: unknown key (expected adapter, versions, reason, expires)",
        f"{path}: waiver[0].reason: a waiver needs a non-empty reason, got ' '",
        f"{path}: waiver[0].expires: expected a TOML date such as 2026-12-31, got 'soon'",
        f"{path}: waiver[0].versions: 'two' is not a version specifier",
    ]


# -- the built-in catalogue --------------------------------------------------------------------------
def test_status_table_with_the_builtin_catalogue(today: _dt.date) -> None:
    """The same expectations hold against the real catalogue data."""
    from spyre_sim.catalogue import builtin_catalogue

    catalogue = builtin_catalogue()
    assert tuple(r.name for r in catalogue.releases) == RELEASES
    reg = Registry(catalogue)
    reg.load_directory(DATA / "valid")
    lifecycle = Lifecycle(reg, today=today)
    for release in RELEASES:
        (alpha_status, alpha_version), beta, delta, gamma = AUTO[release]
        rows = lifecycle.status_at(release)
        assert [(r.name, r.status) for r in rows] == [
            ("alpha", alpha_status),
            ("beta", beta),
            ("delta", delta),
            ("gamma", gamma),
        ], release
        assert str(rows[0].version) == alpha_version


def test_waivers_for_adapters_or_versions_not_installed_are_errors(
    registry: Registry, tmp_path: Path, today: _dt.date
) -> None:
    from spyre_adapters import audit_release

    path = tmp_path / "waivers.toml"
    path.write_text(
        'schema_version = 1\n[[waiver]]\nadapter = "detla"\nreason = "typo"\n'
        'expires = 2026-12-31\n[[waiver]]\nadapter = "delta"\nversions = ">=2"\n'
        'reason = "no such version"\nexpires = 2026-12-31\n'
    )
    waivers = load_waivers(path)
    with pytest.raises(WaiverError) as info:
        audit_release(registry, "2026.06", waivers=waivers, today=today)
    assert [str(p) for p in info.value.problems] == [
        f"{path}: waiver[0].adapter: no adapter 'detla' is installed (did you mean 'delta'?); "
        "a waiver for it would waive nothing",
        f"{path}: waiver[1].versions: '>=2' matches no installed version of delta (installed: 1.0)",
    ]


# -- versions side by side -----------------------------------------------------------------------
def test_resolution_skips_a_newer_version_whose_gaps_are_closed(
    registry: Registry, today: _dt.date
) -> None:
    """For R: the newest version whose range contains R and whose gaps are open at R."""
    newer = dataclasses.replace(
        registry.get("delta"),
        version=Version("2.0"),
        gaps=("pow",),  # closed from 2026.03
        retire_by=None,
    )
    registry.add(newer, source="test")
    lifecycle = Lifecycle(registry, today=today)
    assert str(lifecycle.resolve_version("delta", "2026.02").version) == "2.0"  # type: ignore[union-attr]
    # at 2026.05 pow is closed, dtype-cast still open: 1.0 is the one needed
    assert str(lifecycle.resolve_version("delta", "2026.05").version) == "1.0"  # type: ignore[union-attr]
    rows = {(r.name, str(r.version)): r.status for r in lifecycle.versions_at("2026.05")}
    assert rows[("delta", "1.0")] is A
    assert rows[("delta", "2.0")] is R
    # at 2026.02 the newer one covers the release: the old one is superseded, not applied
    rows = {(r.name, str(r.version)): r for r in lifecycle.versions_at("2026.02")}
    old = rows[("delta", "1.0")]
    assert old.status is Status.SUPERSEDED
    assert not old.applied
    assert old.reason == "delta 2.0 supersedes it at 2026.02"
    assert rows[("delta", "2.0")].superseded == (Version("1.0"),)
    assert lifecycle.superseded_by(registry.get("delta", "1.0"), "2026.02") == newer
    assert lifecycle.superseded_by(registry.get("delta", "1.0"), "2026.05") is None


def test_versions_at_lists_every_installed_version(registry: Registry, today: _dt.date) -> None:
    rows = Lifecycle(registry, today=today).versions_at("2026.05")
    assert [(r.name, str(r.version), r.status) for r in rows] == [
        ("alpha", "1.0", OUT),
        ("alpha", "2.0", A),
        ("beta", "1.0", P),
        ("delta", "1.0", A),
        ("gamma", "1.0", R),
    ]


def test_audit_lists_superseded_versions_and_they_never_fail_the_gate(
    registry: Registry, today: _dt.date
) -> None:
    from spyre_adapters import audit_release

    registry.add(dataclasses.replace(registry.get("beta"), version=Version("1.1")), source="test")
    report = audit_release(registry, "2026.05", today=today, strict=True)
    document = report.to_json()
    assert document["superseded"] == [
        {
            "name": "beta",
            "version": "1.0",
            "by": "1.1",
            "reason": "beta 1.1 supersedes it at 2026.05",
        }
    ]
    beta = next(a for a in document["adapters"] if a["name"] == "beta")
    assert (beta["version"], beta["superseded"]) == ("1.1", ["1.0"])
    assert document["counts"]["superseded"] == 1
    assert not any(f["adapter"] == "beta" for f in document["findings"])
    # a release of the user's own (not in the catalogue) works the same
    from .conftest import FakeRelease

    whatif = FakeRelease("2026.11", frozenset({"stick-align"}))
    report = audit_release(registry, whatif, today=today)
    assert [(r.name, str(r.version), r.status) for r in report.superseded] == [
        ("beta", "1.0", Status.SUPERSEDED)
    ]


@pytest.mark.parametrize("release", RELEASES)
def test_status_for_one_adapter_is_its_row_of_the_table(
    registry: Registry, release: str, today: _dt.date
) -> None:
    lifecycle = Lifecycle(registry, today=today)
    for row in lifecycle.status_at(release):
        assert lifecycle.status_for(row.name, release) == row
    from spyre_adapters.errors import UnknownAdapterError

    with pytest.raises(UnknownAdapterError):
        lifecycle.status_for("no-such-adapter", release)
