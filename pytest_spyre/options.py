"""The plugin's options: command line, ini key and environment variable for each, and their
validation into one frozen :class:`SpyreOptions`.

Precedence, highest first: command line, environment variable, ini key, default. Values are read
in pytest hooks (never at import time). Every bad value is a :class:`pytest.UsageError` that
names the value, where it came from and what is accepted.

This module must stay importable without torch: the plugin module imports it in every run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

__all__ = [
    "OPTION_SPECS",
    "OptionSpec",
    "SpyreOptions",
    "UnsupportedPolicy",
    "add_options",
    "cli_enabled",
    "resolve_options",
]

UnsupportedPolicy = Literal["fail", "fallback"]
HarnessMode = Literal["host", "device"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class OptionSpec:
    """One setting of the plugin and its three spellings."""

    dest: str
    flag: str
    ini: str
    env: str
    kind: Literal["switch", "onoff", "choice", "text"]
    default: str | bool | None
    help: str
    choices: tuple[str, ...] = ()
    metavar: str | None = None


OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "spyre", "--spyre", "spyre", "SPYRE", "switch", False,
        "run the tests on the emulated Spyre device (the plugin is inert without it)",
    ),
    OptionSpec(
        "spyre_stack", "--spyre-stack", "spyre_stack", "SPYRE_STACK", "text", None,
        "stack release to emulate: a built-in name (e.g. 2026.09) or a path to a release "
        "TOML file; default: the newest built-in release",
        metavar="R|PATH",
    ),
    OptionSpec(
        "spyre_lock", "--spyre-lock", "spyre_lock", "SPYRE_LOCK", "text", None,
        "adapter lock file (from `spyre-adapters pin`): apply exactly the pinned adapter set",
        metavar="FILE",
    ),
    OptionSpec(
        "spyre_numerics", "--spyre-numerics", "spyre_numerics", "SPYRE_NUMERICS", "onoff", True,
        "DL16/fp16 numerics emulation: on (default) or off (functional mode)",
        metavar="on|off",
    ),
    OptionSpec(
        "spyre_layout_checks", "--spyre-layout-checks", "spyre_layout_checks",
        "SPYRE_LAYOUT_CHECKS", "onoff", True,
        "device layout rules (sticks, rank, offsets): on (default) or off",
        metavar="on|off",
    ),
    OptionSpec(
        "spyre_harness", "--spyre-harness", "spyre_harness", "SPYRE_HARNESS", "choice", "host",
        "ops outside the model scope (building inputs, comparing, asserting): 'host' runs them "
        "with host semantics, uncounted as gaps (default); 'device' judges them by the "
        "catalogue like model ops",
        choices=("host", "device"),
        metavar="host|device",
    ),
    OptionSpec(
        "spyre_unsupported", "--spyre-unsupported", "spyre_unsupported", "SPYRE_UNSUPPORTED",
        "choice", "fail",
        "an op the release cannot lower: 'fail' the test naming the gap (default) or "
        "'fallback': run the op on the host and record it",
        choices=("fail", "fallback"),
        metavar="fail|fallback",
    ),
    OptionSpec(
        "spyre_compare", "--spyre-compare", "spyre_compare", "SPYRE_COMPARE", "switch", False,
        "also run each top-level model forward on a CPU copy of the model and record "
        "cosine / max-abs-diff / top-1 agreement",
    ),
    OptionSpec(
        "spyre_expectations", "--spyre-expectations", "spyre_expectations",
        "SPYRE_EXPECTATIONS", "text", None,
        "expected outcomes per test and release (TOML, see pytest_spyre.expectations): an "
        "unexpected failure or an unexpected pass fails the run",
        metavar="FILE",
    ),
    OptionSpec(
        "spyre_report", "--spyre-report", "spyre_report", "SPYRE_REPORT", "text", None,
        "write a JSON report (schema in pytest_spyre.report) to FILE",
        metavar="FILE",
    ),
    OptionSpec(
        "spyre_capture_bridges", "--spyre-capture-bridges", "spyre_capture_bridges",
        "SPYRE_CAPTURE_BRIDGES", "text", None,
        "record the arguments of ops the release refuses inside the model scope as bridge "
        "samples in DIR (pytest_spyre.capture_bridges; .ci/generate_bridges.py --samples DIR)",
        metavar="DIR",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class SpyreOptions:
    """The validated settings of one run. ``stack`` is the raw spec; the device resolves it."""

    enabled: bool = False
    stack: str | None = None
    lock: Path | None = None
    numerics: bool = True
    layout_checks: bool = True
    unsupported: UnsupportedPolicy = "fail"
    harness: HarnessMode = "host"
    compare: bool = False
    report: Path | None = None
    expectations: Path | None = None
    capture_bridges: Path | None = None
    sources: Mapping[str, str] | None = None  # dest -> where the value came from, for messages

    def describe(self) -> str:
        """One line for the header: the settings that change behaviour."""
        return (
            f"numerics {'on' if self.numerics else 'off'}, "
            f"layout checks {'on' if self.layout_checks else 'off'}, "
            f"unsupported ops: {self.unsupported}, harness ops: "
            + ("host semantics" if self.harness == "host" else "judged like model ops")
            + (", compare with CPU" if self.compare else "")
        )


def add_options(parser: pytest.Parser) -> None:
    """Register the option group and ini keys (called from ``pytest_addoption``)."""
    group = parser.getgroup("spyre", "emulated IBM Spyre device (pytest-spyre)")
    for spec in OPTION_SPECS:
        helptext = f"{spec.help} [env {spec.env}, ini {spec.ini}]"
        if spec.kind == "switch":
            group.addoption(spec.flag, action="store_true", default=None, dest=spec.dest,
                            help=helptext)  # fmt: skip
        else:
            group.addoption(spec.flag, action="store", default=None, dest=spec.dest,
                            metavar=spec.metavar, help=helptext)  # fmt: skip
        parser.addini(spec.ini, help=f"{spec.help} (like {spec.flag})", type="string",
                      default="")  # fmt: skip


def _raw_value(
    spec: OptionSpec, namespace: Any, environ: Mapping[str, str], ini: Callable[[str], str]
) -> tuple[str | bool | None, str]:
    cli = getattr(namespace, spec.dest, None)
    if cli is not None:
        return cli, spec.flag
    if spec.env in environ:
        return environ[spec.env], f"environment variable {spec.env}"
    value = ini(spec.ini)
    if value != "":
        return value, f"ini key {spec.ini}"
    return None, "default"


def _as_bool(spec: OptionSpec, value: str | bool, source: str, accepted: str) -> bool:
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise pytest.UsageError(
        f"{spec.flag}: {value!r} (from {source}) is not accepted; use {accepted}"
    )


def cli_enabled(namespace: Any, environ: Mapping[str, str], ini: Callable[[str], str]) -> bool:
    """Whether the run asks for the device, without validating anything else."""
    spec = OPTION_SPECS[0]
    value, source = _raw_value(spec, namespace, environ, ini)
    if value is None:
        return False
    return _as_bool(spec, value, source, "1/true/yes/on or 0/false/no/off")


def resolve_options(
    namespace: Any,
    environ: Mapping[str, str] | None = None,
    ini: Callable[[str], str] | None = None,
) -> SpyreOptions:
    """Validate every setting; raise :class:`pytest.UsageError` on the first bad one.

    ``namespace`` is pytest's (early) option namespace, ``environ`` defaults to
    :data:`os.environ`, ``ini`` maps an ini key to its string value ("" when unset).
    Without ``--spyre`` (or its env/ini equivalent) nothing else is validated, except that a
    ``--spyre-*`` option given on the command line without ``--spyre`` is an error.
    """
    env = os.environ if environ is None else environ
    getini: Callable[[str], str] = ini if ini is not None else (lambda _key: "")
    enabled = cli_enabled(namespace, env, getini)
    if not enabled:
        given = [s.flag for s in OPTION_SPECS[1:] if getattr(namespace, s.dest, None) is not None]
        if given:
            raise pytest.UsageError(
                f"{', '.join(given)} given without --spyre: these options only act on the "
                "emulated device; add --spyre (or set SPYRE=1, or ini spyre = true)"
            )
        return SpyreOptions(enabled=False)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in OPTION_SPECS[1:]:
        raw, source = _raw_value(spec, namespace, env, getini)
        sources[spec.dest] = source
        if raw is None:
            values[spec.dest] = spec.default
            continue
        if spec.kind in ("switch", "onoff"):
            accepted = "on or off" if spec.kind == "onoff" else "1/true/yes/on or 0/false/no/off"
            values[spec.dest] = _as_bool(spec, raw, source, accepted)
        elif spec.kind == "choice":
            text = str(raw).strip().lower()
            if text not in spec.choices:
                raise pytest.UsageError(
                    f"{spec.flag}: {raw!r} (from {source}) is not accepted; "
                    f"use one of: {', '.join(spec.choices)}"
                )
            values[spec.dest] = text
        else:
            text = str(raw).strip()
            if not text:
                raise pytest.UsageError(
                    f"{spec.flag}: an empty value (from {source}) is not accepted; "
                    f"give {spec.metavar}"
                )
            values[spec.dest] = text

    lock = Path(values["spyre_lock"]) if values["spyre_lock"] else None
    if lock is not None and not lock.is_file():
        raise pytest.UsageError(
            f"--spyre-lock: {str(lock)!r} (from {sources['spyre_lock']}) is not a file; "
            "write one with `spyre-adapters pin --stack R` or drop the option"
        )
    report = Path(values["spyre_report"]) if values["spyre_report"] else None
    if report is not None:
        _check_report_path(report, sources["spyre_report"])
    expectations = Path(values["spyre_expectations"]) if values["spyre_expectations"] else None
    if expectations is not None and not expectations.is_file():
        raise pytest.UsageError(
            f"--spyre-expectations: {str(expectations)!r} (from "
            f"{sources['spyre_expectations']}) is not a file"
        )
    capture = Path(values["spyre_capture_bridges"]) if values["spyre_capture_bridges"] else None
    if capture is not None:
        _check_capture_dir(capture, sources["spyre_capture_bridges"])
    return SpyreOptions(
        enabled=True,
        stack=values["spyre_stack"],
        lock=lock,
        numerics=values["spyre_numerics"],
        layout_checks=values["spyre_layout_checks"],
        unsupported=values["spyre_unsupported"],
        harness=values["spyre_harness"],
        compare=values["spyre_compare"],
        report=report,
        expectations=expectations,
        capture_bridges=capture,
        sources=sources,
    )


def _check_report_path(report: Path, source: str) -> None:
    """Refuse a report path that cannot be written, before any test runs."""
    where = f"--spyre-report: {str(report)!r} (from {source})"
    if report.is_dir():
        raise pytest.UsageError(
            f"{where} is a directory; give a file path, e.g. {report / 'spyre.json'}"
        )
    parent = report.parent.resolve()
    if not parent.is_dir():
        raise pytest.UsageError(
            f"{where}: its directory {str(parent)!r} does not exist; create it or choose another path"
        )
    if not os.access(parent, os.W_OK) or (report.exists() and not os.access(report, os.W_OK)):
        raise pytest.UsageError(
            f"{where} cannot be written (permission denied); choose another path"
        )


def _check_capture_dir(directory: Path, source: str) -> None:
    """Refuse a capture folder that cannot be written, before any test runs (it is created at
    the end of the session when it does not exist yet)."""
    where = f"--spyre-capture-bridges: {str(directory)!r} (from {source})"
    if directory.exists() and not directory.is_dir():
        raise pytest.UsageError(f"{where} exists and is not a directory; give a folder path")
    existing = directory.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"{where} cannot be written ({existing} is not a writable directory); choose "
            "another path"
        )
