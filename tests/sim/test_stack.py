"""Selecting the active stack release: plain call, context manager, nesting, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spyre_sim.catalogue import Decision, builtin_catalogue
from spyre_sim.errors import CatalogueError, SpyreSimError
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
