"""The CLI's pins: ``pin`` writes a lock per stack release, ``check`` compares it with what is
installed (current, stale, superseded, tampered, unreadable, older schema).

Runs against the built-in stack catalogue with the test manifests (built-in adapters disabled
through SPYRE_ADAPTERS_DISABLE), as test_cli.py does.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from spyre_adapters.cli import ExitCode

from .conftest import DATA, Run, statuses


def test_pin_then_check(run: Run, tmp_path: Path) -> None:
    lock = tmp_path / "spyre-adapters.lock"
    result = run("pin", "--stack", "2026.05", "--stack", "2026.08", "-o", str(lock))
    assert result.code == ExitCode.OK
    assert f"wrote {lock} (2026.05, 2026.08)" in result.err
    assert "gamma" in result.out
    check = run("check", "--lock", str(lock))
    assert check.code == ExitCode.OK
    assert check.err == f"spyre-adapters: {lock} is current (2 release(s) checked)\n"
    assert "the lock is current: every pin matches what is installed" in check.out
    assert "finding" not in check.out  # no empty table


def test_pin_defaults_to_the_working_directory(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("pin", "--stack", "2026.02").code == ExitCode.OK
    assert (tmp_path / "spyre-adapters.lock").is_file()
    assert run("check").code == ExitCode.OK


def test_check_stale_lock_exits_1(run: Run, tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    run("pin", "--stack", "2026.05", "-o", str(lock))
    newer = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", newer)
    (newer / "zeta").mkdir()
    text = (newer / "gamma" / "1.0.toml").read_text().replace('"gamma"', '"zeta"')
    (newer / "zeta" / "1.0.toml").write_text(text.replace('["mem-pool"]', '["sin-cos"]'))
    result = run("check", "--lock", str(lock), "--format", "json", manifests=newer)
    assert result.code == ExitCode.FINDINGS
    assert result.json()["findings"] == [
        {
            "release": "2026.05",
            "adapter": "zeta",
            "kind": "stale",
            "message": "resolution now applies zeta 1.0, which the lock does not pin",
            "failing": True,
        }
    ]
    assert "is stale" in result.err


def test_check_reports_a_superseded_pin_without_failing_and_pin_upgrade_moves_it(
    run: Run, tmp_path: Path
) -> None:
    lock = tmp_path / "x.lock"
    run("pin", "--stack", "2026.05", "--stack", "2026.09", "-o", str(lock))
    newer = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", newer)
    text = (newer / "alpha" / "2.0.toml").read_text().replace('version = "2.0"', 'version = "2.1"')
    (newer / "alpha" / "2.1.toml").write_text(text)
    result = run("check", "--lock", str(lock), "--format", "json", manifests=newer)
    assert result.code == ExitCode.OK, result.err
    document = result.json()
    assert document["passed"] is True
    assert document["findings"] == [
        {
            "release": "2026.05",
            "adapter": "alpha",
            "kind": "superseded",
            "message": "pinned 2.0; 2.1 supersedes it at 2026.05 (`spyre-adapters pin "
            "--upgrade alpha` moves the pin)",
            "failing": False,
        }
    ]
    assert "1 pin has a newer version" in result.err
    table = run("check", "--lock", str(lock), manifests=newer)
    assert "superseded" in table.out

    moved = run("pin", "--upgrade", "alpha", "-o", str(lock), manifests=newer)
    assert moved.code == ExitCode.OK, moved.err
    assert "alpha 2.0 -> 2.1 at 2026.05" in moved.err
    after = run("check", "--lock", str(lock), manifests=newer)
    assert after.code == ExitCode.OK
    assert after.err == f"spyre-adapters: {lock} is current (2 release(s) checked)\n"
    assert "the lock is current" in after.out


def test_check_tampered_lock_exits_3(run: Run, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(DATA / "valid", manifests)
    lock = tmp_path / "x.lock"
    run("pin", "--stack", "2026.05", "-o", str(lock), manifests=manifests)
    beta = manifests / "beta" / "1.0.toml"
    beta.write_text(beta.read_text().replace("gpt2", "gpt2-xl"))
    result = run("check", "--lock", str(lock), manifests=manifests)
    assert result.code == ExitCode.INVALID
    assert re.search(
        rf'releases."2026.05" beta: tampered: manifest {re.escape(str(beta))} hashes to', result.err
    )


def test_check_without_a_lock_or_with_a_broken_one(run: Run, tmp_path: Path) -> None:
    missing = run("check", "--lock", str(tmp_path / "none.lock"))
    assert missing.code == ExitCode.INVALID
    assert "no lock file here; create it with `spyre-adapters pin --stack R`" in missing.err
    broken = tmp_path / "broken.lock"
    broken.write_text("schema_version = 2\nreleases = 3\n")
    result = run("check", "--lock", str(broken))
    assert result.code == ExitCode.INVALID
    assert f"{broken}: releases: expected a table of releases" in result.err


def test_user_release_file_for_audit_pin_and_check(run: Run, tmp_path: Path) -> None:
    """A what-if release extending 2026.09 where the mem-pool regression is back."""
    whatif = tmp_path / "whatif.toml"
    whatif.write_text(
        'schema_version = 1\n\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        'date = 2026-11-20\nsummary = "the memory-pool regression is back"\n\n'
        '[gaps]\nmem-pool = "open"\n'
    )
    document = run("audit", "--stack", str(whatif), "--format", "json").json()
    assert document["release"] == "2026.11"
    assert statuses(document)["gamma"] == "1.0 active"
    gamma = next(a for a in document["adapters"] if a["name"] == "gamma")
    assert gamma["retirable_in"] is None  # no later release closes it again
    lock = tmp_path / "whatif.lock"
    assert run("pin", "--stack", str(whatif), "-o", str(lock)).code == ExitCode.OK
    check = run("check", "--lock", str(lock), "--stack", str(whatif))
    assert check.code == ExitCode.OK, check.err
    assert '[releases."2026.11"]' in lock.read_text()


def test_pin_checks_the_output_path_before_any_work(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_registry(args: object) -> None:
        raise AssertionError("the registry was built before the output path was checked")

    monkeypatch.setattr("spyre_adapters.cli._pin.registry_for", no_registry)
    missing = tmp_path / "nonexistent" / "dir" / "x.lock"
    result = run("pin", "--stack", "2026.05", "-o", str(missing))
    assert result.code == ExitCode.USAGE
    assert result.err == (
        f"spyre-adapters: error: cannot write {missing}: the folder {missing.parent} does not "
        "exist (create it first)\n"
    )
    folder = run("pin", "--stack", "2026.05", "-o", str(tmp_path))
    assert folder.code == ExitCode.USAGE
    assert "is a folder; name a file" in folder.err
    nothing = run("pin")
    assert nothing.code == ExitCode.USAGE
    assert "pin needs --stack R (pin releases) or --upgrade NAME" in nothing.err
    upgrade = run("pin", "--upgrade", "alpha", "-o", str(tmp_path / "none.lock"))
    assert upgrade.code == ExitCode.USAGE
    assert "no lock file" in upgrade.err


def test_check_a_table_for_an_unknown_release_exits_3_naming_the_lock(
    run: Run, tmp_path: Path
) -> None:
    lock = tmp_path / "x.lock"
    run("pin", "--stack", "2026.05", "-o", str(lock))
    lock.write_text(lock.read_text().replace('"2026.05"', '"2026.04"'))
    result = run("check", "--lock", str(lock))
    assert result.code == ExitCode.INVALID
    assert f"{lock}: releases.\"2026.04\": '2026.04' is not a release of the stack catalogue" in (
        result.err
    )


def test_pin_replaces_a_schema_1_lock_and_check_refuses_it(run: Run, tmp_path: Path) -> None:
    lock = tmp_path / "old.lock"
    lock.write_text('schema_version = 1\n[releases."2026.05"]\nadapters = []\n')
    refused = run("check", "--lock", str(lock))
    assert refused.code == ExitCode.INVALID
    assert "written by an older spyre-adapters" in refused.err
    result = run("pin", "--stack", "2026.09", "-o", str(lock))
    assert result.code == ExitCode.OK, result.err
    assert "replacing" in result.err
    assert "its tables: 2026.05" in result.err
    assert run("check", "--lock", str(lock)).code == ExitCode.OK
