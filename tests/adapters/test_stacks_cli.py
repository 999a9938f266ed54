"""``spyre-adapters stacks``: provenance of every release, and ``--diff OLD NEW``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spyre_adapters.cli import ExitCode, main
from spyre_sim.catalogue import builtin_catalogue
from spyre_sim.errors import SpyreStackResolutionWarning


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "builtin")


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--format", "json")
    assert code == ExitCode.OK, err
    return json.loads(out)


def test_stacks_json_shows_the_upstream_state_and_sources_of_every_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _json(capsys, "stacks")
    releases = {r["name"]: r for r in document["releases"]}
    catalogue = builtin_catalogue()
    assert list(releases) == list(catalogue.names)
    august = releases["2026.08"]
    assert (august["upstream"]["from"], august["upstream"]["to"]) == ("2026-07-25", "2026-08-28")
    assert {"sha": "8068434", "date": "2026-08-28", "source": ["#4120"]} in august["upstream"][
        "commits"
    ]
    assert "#3782" in august["sources"]
    assert august["classified_ops"] == len(catalogue.release("2026.08").op_rules)
    changed = {g["gap"]: g for g in august["changes"]["gaps"]}
    assert changed["moe-topk"]["to"] == "closed"
    assert changed["moe-topk"]["source"] == ["#3782", "#452"]
    assert august["opens"] == ["mem-pool"]
    assert releases["2025.12"]["changes"] == {"gaps": [], "ops": []}


def test_stacks_table_has_the_upstream_range_and_op_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "stacks")
    assert code == ExitCode.OK
    assert "2026-08-29..2026-09-25" in out
    assert str(len(builtin_catalogue().newest.op_rules)) in out


def test_stacks_diff_json_lists_gaps_ops_and_miscompiles(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _json(capsys, "stacks", "--diff", "2026.08", "2026.09")
    assert (document["kind"], document["from"], document["to"]) == (
        "stacks-diff",
        "2026.08",
        "2026.09",
    )
    gaps = {g["gap"]: g for g in document["gaps"]}
    assert gaps["sin-cos"] == {
        "gap": "sin-cos",
        "from": "fallback",
        "to": "closed",
        "set_in": "2026.09",
        "source": ["docs/STACK.md §5", "#4282", "#4287"],
        "note": "",
    }
    ops = {o["op"]: o for o in document["ops"]}
    assert ops["aten.sin"]["from"] == {"decision": "cpu-fallback", "gap": "sin-cos"}
    assert ops["aten.sin"]["to"] == {"decision": "native", "gap": None}
    miscompiles = {m.get("gap"): m["change"] for m in document["miscompiles"]}
    assert miscompiles["mem-pool"] == "goes"
    assert miscompiles["pow-cube"] == "goes"


def test_stacks_diff_accepts_upstream_versions(capsys: pytest.CaptureFixture[str]) -> None:
    from spyre_sim.state import device_state

    for spec in ("release-2026-07-01", "0.0.1+g8068434"):
        device_state.warned_resolutions.discard(spec)
    with pytest.warns(SpyreStackResolutionWarning) as record:
        document = _json(capsys, "stacks", "--diff", "release-2026-07-01", "0.0.1+g8068434")
    assert (document["from"], document["to"]) == ("2026.07", "2026.08")
    messages = [str(w.message) for w in record]
    assert any("'release-2026-07-01'" in m and "release 2026.07" in m for m in messages)
    assert any("'0.0.1+g8068434'" in m and "release 2026.08" in m for m in messages)
    assert "mem-pool" in {m.get("gap") for m in document["miscompiles"]}


def test_stacks_diff_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "stacks", "--diff", "2026.07", "2026.08")
    assert code == ExitCode.OK
    for title in ("Gaps 2026.07 -> 2026.08", "Ops 2026.07 -> 2026.08", "Miscompiles"):
        assert title in out
    assert "decode-query-layout" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("2026.09", "2026.08"), "--diff goes from an older release to a newer one"),
        (("2026.09", "2026.09"), "--diff goes from an older release to a newer one"),
        (("2026.04", "2026.09"), "unknown stack release '2026.04'"),
    ],
)
def test_stacks_diff_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, str], message: str
) -> None:
    code, _, err = _run(capsys, "stacks", "--diff", *argv)
    assert code == ExitCode.USAGE
    assert message in err
