"""Options, ini keys and environment variables of the plugin, and their usage errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_spyre.options import OPTION_SPECS, SpyreOptions, resolve_options


def _ns(**given: object) -> SimpleNamespace:
    values: dict[str, object] = {spec.dest: None for spec in OPTION_SPECS}
    values.update(given)
    return SimpleNamespace(**values)


def _ini(values: dict[str, str]) -> Callable[[str], str]:
    return lambda key: values.get(key, "")


def test_off_by_default() -> None:
    assert resolve_options(_ns(), {}, _ini({})) == SpyreOptions(enabled=False)


def test_defaults_when_on() -> None:
    opts = resolve_options(_ns(spyre=True), {}, _ini({}))
    assert (opts.enabled, opts.stack, opts.lock, opts.report) == (True, None, None, None)
    assert (opts.numerics, opts.layout_checks, opts.unsupported, opts.compare) == (
        True, True, "fail", False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"cli": "2026.05", "env": "2026.03", "ini": "2025.12"}, "2026.05"),
        ({"env": "2026.03", "ini": "2025.12"}, "2026.03"),
        ({"ini": "2025.12"}, "2025.12"),
    ],
)
def test_precedence_cli_env_ini(source: dict[str, str], expected: str) -> None:
    env = {"SPYRE_STACK": source["env"]} if "env" in source else {}
    ini = {"spyre_stack": source["ini"]} if "ini" in source else {}
    opts = resolve_options(_ns(spyre=True, spyre_stack=source.get("cli")), env, _ini(ini))
    assert opts.stack == expected
    assert opts.sources is not None
    assert opts.sources["spyre_stack"] in {"--spyre-stack", "environment variable SPYRE_STACK",
                                           "ini key spyre_stack"}  # fmt: skip


@pytest.mark.parametrize(
    ("env", "ini", "enabled"),
    [({"SPYRE": "1"}, {}, True), ({"SPYRE": "off"}, {"spyre": "true"}, False),
     ({}, {"spyre": "yes"}, True), ({}, {}, False)],
)  # fmt: skip
def test_enable_through_env_and_ini(
    env: dict[str, str], ini: dict[str, str], enabled: bool
) -> None:
    assert resolve_options(_ns(), env, _ini(ini)).enabled is enabled


def test_switches_from_env() -> None:
    env = {"SPYRE": "on", "SPYRE_NUMERICS": "off", "SPYRE_LAYOUT_CHECKS": "OFF",
           "SPYRE_UNSUPPORTED": "fallback", "SPYRE_COMPARE": "1"}  # fmt: skip
    opts = resolve_options(_ns(), env, _ini({}))
    assert (opts.numerics, opts.layout_checks, opts.unsupported, opts.compare) == (
        False, False, "fallback", True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("given", "env", "message"),
    [
        ({"spyre_numerics": "maybe"}, {}, "--spyre-numerics: 'maybe' (from --spyre-numerics) is "
         "not accepted; use on or off"),
        ({}, {"SPYRE_LAYOUT_CHECKS": "2"}, "--spyre-layout-checks: '2' (from environment "
         "variable SPYRE_LAYOUT_CHECKS) is not accepted; use on or off"),
        ({"spyre_unsupported": "skip"}, {}, "use one of: fail, fallback"),
        ({"spyre_stack": " "}, {}, "--spyre-stack: an empty value"),
        ({"spyre_lock": "no/such.lock"}, {}, "--spyre-lock: 'no/such.lock' (from --spyre-lock) "
         "is not a file"),
        ({"spyre_report": "no/such/dir/r.json"}, {}, "--spyre-report: 'no/such/dir/r.json' (from --spyre-report): its directory"),
    ],
)  # fmt: skip
def test_bad_values_are_usage_errors(
    given: dict[str, str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(pytest.UsageError) as info:
        resolve_options(_ns(spyre=True, **given), env, _ini({}))
    assert message in str(info.value)


def test_bad_enable_value() -> None:
    with pytest.raises(pytest.UsageError, match=r"--spyre: 'sometimes' \(from environment"):
        resolve_options(_ns(), {"SPYRE": "sometimes"}, _ini({}))


def test_device_options_without_spyre_are_an_error() -> None:
    with pytest.raises(pytest.UsageError, match="--spyre-stack given without --spyre"):
        resolve_options(_ns(spyre_stack="2026.05"), {}, _ini({}))
    # env and ini values are ignored while the plugin is off (it stays inert)
    assert not resolve_options(_ns(), {"SPYRE_STACK": "bogus"}, _ini({})).enabled


def test_lock_and_report_paths(tmp_path: Path) -> None:
    lock = tmp_path / "spyre-adapters.lock"
    lock.write_text("")
    opts = resolve_options(
        _ns(spyre=True, spyre_lock=str(lock), spyre_report=str(tmp_path / "r.json")), {},
        _ini({}),
    )  # fmt: skip
    assert opts.lock == lock
    assert opts.report == tmp_path / "r.json"


def test_ini_keys_reach_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nspyre_numerics = off\nspyre_unsupported = fail\n")
    config = pytester.parseconfig()
    assert config.getini("spyre_numerics") == "off"
    from pytest_spyre.plugin import OPTIONS_KEY

    assert config.stash[OPTIONS_KEY].enabled is False  # ini values alone do not switch it on


def test_usage_error_from_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--spyre", "--spyre-numerics=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--spyre-numerics: 'sometimes' * is not accepted; use on or off*"]
    )


def test_usage_error_from_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nspyre = true\nspyre_unsupported = ignore\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--spyre-unsupported: 'ignore' (from ini key spyre_unsupported) is not accepted; "
         "use one of: fail, fallback*"]
    )  # fmt: skip


def test_help_lists_every_option_with_env_and_ini(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for spec in OPTION_SPECS:
        result.stdout.fnmatch_lines([f"*{spec.flag}*"])
        assert spec.env in result.stdout.str()
        result.stdout.fnmatch_lines([f"*{spec.ini} *"])
