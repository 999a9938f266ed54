"""Selecting the active stack release: plain call, context manager, nesting, errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from spyre_sim.catalogue import Decision, builtin_catalogue, resolve_upstream
from spyre_sim.errors import CatalogueError, SpyreSimError, SpyreStackResolutionWarning
from spyre_sim.stack import current_stack, stack_generation, use_stack

DATA = Path(__file__).resolve().parents[1] / "data" / "releases"


@pytest.fixture(autouse=True)
def _restore_active_stack() -> Iterator[None]:
    with use_stack(current_stack()):
        yield


def test_default_is_the_newest_builtin_and_ignores_the_environment() -> None:
    code = (
        "from spyre_sim.stack import current_stack, stack_generation\n"
        "print(stack_generation(), current_stack().name)\n"
    )
    env = {**os.environ, "SPYRE_STACK": "2025.12", "SPYRE_SIM_STACK": "2025.12"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    assert out == ["0", builtin_catalogue().newest.name]


def test_plain_call_stays_active() -> None:
    use_stack("2026.05")
    assert current_stack().name == "2026.05"
    use_stack("2025.12")
    assert current_stack().name == "2025.12"


def test_context_manager_restores_and_nests() -> None:
    use_stack("2026.09")
    with use_stack("2026.05") as outer:
        assert outer is current_stack()
        assert outer.name == "2026.05"
        with use_stack("2025.12") as inner:
            assert current_stack() is inner
        assert current_stack() is outer
    assert current_stack().name == "2026.09"


def test_context_manager_restores_on_error() -> None:
    use_stack("2026.03")
    seen: list[str] = []

    def fail_inside() -> None:
        with use_stack("2026.07"):
            seen.append(current_stack().name)
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_inside()
    assert seen == ["2026.07"]
    assert current_stack().name == "2026.03"


def test_generation_changes_with_the_active_release() -> None:
    use_stack("2026.02")
    before = stack_generation()
    use_stack("2026.02")  # same release: no change
    assert stack_generation() == before
    with use_stack("2026.03"):
        inside = stack_generation()
        assert inside != before
    assert stack_generation() not in (before, inside)
    assert current_stack().name == "2026.02"


def test_unknown_name_lists_valid_names_and_changes_nothing() -> None:
    use_stack("2026.06")
    before = stack_generation()
    with pytest.raises(SpyreSimError) as info:
        use_stack("2026.13")
    message = str(info.value)
    assert "'2026.13'" in message
    for name in builtin_catalogue().names:
        assert name in message
    assert current_stack().name == "2026.06"
    assert stack_generation() == before


def test_user_release_by_path() -> None:
    path = DATA / "whatif-2026.11.toml"
    with use_stack(path) as release:
        assert current_stack().name == "2026.11"
        assert release.op_rule("aten.cumsum").decision is Decision.NATIVE
    with use_stack(str(path)):
        assert current_stack() is release


def test_broken_user_release_changes_nothing() -> None:
    use_stack("2026.08")
    with pytest.raises(CatalogueError):
        use_stack(DATA / "broken-rules.toml")
    assert current_stack().name == "2026.08"


def test_release_object_is_accepted() -> None:
    release = builtin_catalogue().release("2026.07")
    with use_stack(release) as active:
        assert active is release
        assert current_stack() is release


def test_active_release_is_process_wide() -> None:
    use_stack("2026.05")
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(current_stack().name))
    thread.start()
    thread.join()
    assert seen == ["2026.05"]


# --------------------------------------------------------------------- upstream versions


@pytest.mark.parametrize(
    ("spec", "name", "kind", "exact"),
    [
        ("0.0.1+g8068434", "2026.08", "commit", True),  # torch_spyre.__version__ (#4120)
        ("0.0.1+g6332f6c", "2026.02", "commit", True),  # a prefix of a listed sha
        ("release-2026-09-22", "2026.09", "image", True),
        ("weekly-2026-03-01", "2026.03", "image", True),
        ("nightly-2026-10-09", "2026.09", "image", False),  # after every modelled state
    ],
)
def test_use_stack_resolves_upstream_versions_and_says_so(
    spec: str, name: str, kind: str, exact: bool
) -> None:
    from spyre_sim.state import device_state

    device_state.warned_resolutions.discard(spec)  # warned once per process
    with pytest.warns(SpyreStackResolutionWarning, match=rf"'{re.escape(spec)}'.*{name}"):
        context = use_stack(spec)
    assert current_stack().name == name
    assert context.resolution is not None
    assert (context.resolution.kind, context.resolution.exact) == (kind, exact)
    assert context.resolution.release is current_stack()
    assert name in context.resolution.message
    assert spec in context.resolution.message
    if not exact:
        assert "not modelled" in context.resolution.message


def test_a_name_or_file_has_no_resolution() -> None:
    assert use_stack("2026.05").resolution is None
    assert use_stack(DATA / "whatif-2026.11.toml").resolution is None


def test_the_resolution_warning_is_given_once_per_string() -> None:
    from spyre_sim.state import device_state

    device_state.warned_resolutions.discard("release-2026-06-01")
    with pytest.warns(SpyreStackResolutionWarning):
        use_stack("release-2026-06-01")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert use_stack("release-2026-06-01").resolution is not None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0.0.1", r"names no commit"),
        ("0.0.1+gdeadbee", r"commit deadbee is not one the stack catalogue knows.*8068434"),
        ("release-0.5", r"carries no date"),
        ("release-2025-01-01", r"predates every modelled upstream state"),
        ("nightly-2026-02-30", r"does not carry a valid date"),
    ],
)
def test_unresolvable_upstream_versions_say_why(spec: str, message: str) -> None:
    before = current_stack()
    with pytest.raises(SpyreSimError, match=message):
        use_stack(spec)
    assert current_stack() is before


def test_resolve_upstream_ignores_release_names_and_paths() -> None:
    assert resolve_upstream("2026.05") is None
    assert resolve_upstream("mine/2026.11.toml") is None
