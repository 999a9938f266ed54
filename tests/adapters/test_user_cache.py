"""The user's parse cache: what ``pin``, ``check`` and ``list`` keep across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from spyre_adapters._user_cache import CACHE_ENV, ParseCache, cache_root

# every built-in manifest with its implementation hash, and whether a parse ran
# (parses by the project's own code: importing the adapters makes torch parse some sources)
_HASHES = """
import ast, json, os, sys
if os.environ.get("NO_SEED"):
    import spyre_adapters._user_cache
    spyre_adapters._user_cache.SEED = None
parses = []
real = ast.parse
def counted(*args, **kwargs):
    caller = sys._getframe(1).f_code.co_filename
    if "spyre_adapters" in caller:
        parses.append(caller)
    return real(*args, **kwargs)
ast.parse = counted
from spyre_adapters.implementation import implementation_sha256
from spyre_adapters.preparation import default_registry
hashes = {f"{m.name}@{m.version}": implementation_sha256(m) for m in default_registry()}
print(json.dumps({"hashes": hashes, "parses": len(parses)}))
"""


def _run(cache: str, seed: bool = False) -> dict[str, object]:
    env = {**os.environ, CACHE_ENV: cache}
    env.pop("NO_SEED", None)
    if not seed:
        env["NO_SEED"] = "1"  # the package's own seed left out: what the cache does alone
    done = subprocess.run(
        [sys.executable, "-c", _HASHES], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_second_process_hashes_the_same_without_parsing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    uncached = _run("off")
    first = _run(str(cache))
    second = _run(str(cache))
    assert not (tmp_path / "off").exists()
    assert list(cache.glob("parse-*.json")), "the first process wrote no cache"
    assert first["hashes"] == uncached["hashes"] == second["hashes"]
    assert first["parses"], "nothing was parsed without a cache"
    assert second["parses"] == 0


def test_with_the_shipped_seed_a_first_process_parses_nothing(tmp_path: Path) -> None:
    reference = _run("off")
    seeded = _run(str(tmp_path / "cache"), seed=True)
    assert seeded["hashes"] == reference["hashes"]
    assert reference["parses"]
    assert seeded["parses"] == 0, "the shipped seed misses files: run python .ci/parse_seed.py"


def test_the_shipped_seed_is_what_a_fresh_computation_gives() -> None:
    script = Path(__file__).parents[2] / ".ci" / "parse_seed.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_the_seed_answers_only_where_the_cache_has_no_entry(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"format": 1, "entries": {"aa": {"code": "05"}, "bb": {"x": 1}}}))
    cache = ParseCache(tmp_path / "p.json", seed=seed)
    assert cache.lookup("aa", "code") == "05"
    cache.put("bb", "code", "02")
    assert cache.lookup("bb", "code") == "02"
    assert cache.lookup("bb", "x") == 1
    assert cache.lookup("cc", "code") is None
    cache.save()
    assert json.loads(seed.read_text())["entries"] == {"aa": {"code": "05"}, "bb": {"x": 1}}
    assert ParseCache(tmp_path / "p.json", seed=None).lookup("aa", "code") is None


def test_a_corrupt_or_foreign_cache_is_the_same_as_none(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    reference = _run("off")["hashes"]
    _run(str(cache))
    (written,) = cache.glob("parse-*.json")
    for content in ("{not json", json.dumps({"format": 999, "entries": {}})):
        written.write_text(content)
        assert _run(str(cache))["hashes"] == reference
    # an entry whose values have the wrong types is recomputed, not trusted
    data = json.loads(written.read_text())
    for entry in data["entries"].values():
        entry.update(dict.fromkeys(entry, 7))
    written.write_text(json.dumps(data))
    assert _run(str(cache))["hashes"] == reference


def test_entries_are_keyed_by_content(tmp_path: Path) -> None:
    cache = ParseCache(tmp_path / "p.json")
    cache.put("aa", "code", "01")
    cache.save()
    again = ParseCache(tmp_path / "p.json")
    assert again.get("aa") == {"code": "01"}
    assert again.get("bb") is None


def test_an_unwritable_cache_folder_loses_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    cache = ParseCache(blocker / "sub" / "p.json")
    cache.put("aa", "code", "01")
    cache.save()  # no error: the cache is only an optimisation
    assert cache.get("aa") == {"code": "01"}


@pytest.mark.parametrize("value", ["off", "", "0"])
def test_the_environment_turns_it_off(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from spyre_adapters._user_cache import parse_cache

    monkeypatch.setenv(CACHE_ENV, value)
    assert parse_cache().path is None


def test_the_folder_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "spyre-adapters"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_no_home_folder_is_a_folder_under_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user without a home folder (a service account, ``$HOME`` unset and no password
    entry: ``Path.home()`` raises) gets a per-user folder under the temporary directory
    instead of a traceback from every command."""

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    root = cache_root()
    assert root.parent.parent == Path(tempfile.gettempdir())
    assert root.name == "spyre-adapters"
