"""Write (or check) ``spyre_adapters/parse-seed.json``: the parse results of the package's own
files that ``list``, ``pin`` and ``check`` need, shipped so that the first call after an install
parses nothing (``spyre_adapters._user_cache``). ``pin`` runs for every release, and every
built-in version is hashed besides.

    python .ci/parse_seed.py            # rewrite the seed after editing a package file
    python .ci/parse_seed.py --check    # exit 1 when the seed differs from a fresh computation

The commands run in this process with no user cache and no seed, so every result is computed
afresh; entries of files outside the package (third-party adapters installed beside it) are
left out. Run it after changing any file of ``spyre_adapters`` (tests/adapters/test_parse_seed.py
says so when it is due).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path


def fresh_seed() -> str:
    """The seed's text, computed afresh in this process (which it leaves with no cache)."""
    os.environ["SPYRE_ADAPTERS_CACHE_DIR"] = "off"
    os.environ["NO_COLOR"] = "1"
    import spyre_adapters
    from spyre_adapters import _user_cache
    from spyre_adapters.cli import main
    from spyre_sim import builtin_catalogue

    cache = _user_cache.ParseCache(None, seed=None)
    _user_cache._CACHES.clear()
    _user_cache._CACHES[None] = cache
    with tempfile.TemporaryDirectory() as tmp:
        lock = str(Path(tmp) / "seed.lock")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            stacks = [arg for name in builtin_catalogue().names for arg in ("--stack", name)]
            for argv in (
                ["list"],
                ["audit"],
                ["pin", *stacks, "-o", lock],
                ["check", "--lock", lock],
            ):
                code = main(argv)
                if code != 0:
                    raise SystemExit(f"spyre-adapters {' '.join(argv)} exited {code}")
    from spyre_adapters.implementation import implementation_sha256
    from spyre_adapters.preparation import default_registry

    for manifest in default_registry():  # every version, also those no release resolves
        implementation_sha256(manifest)
    package = Path(spyre_adapters.__file__).parent
    own = {
        hashlib.sha256(path.read_bytes()).hexdigest()
        for path in package.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    entries = {key: dict(sorted(value.items())) for key, value in cache.entries().items()}
    kept = {key: entries[key] for key in sorted(entries) if key in own}
    return (
        json.dumps({"format": _user_cache._FORMAT, "entries": kept}, indent=1, sort_keys=True)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    from spyre_adapters._user_cache import SEED

    text = fresh_seed()
    if args.check:
        current = SEED.read_text(encoding="utf-8") if SEED.is_file() else ""
        if current != text:
            print(f"{SEED} is out of date: run python .ci/parse_seed.py", file=sys.stderr)
            return 1
        print(f"{SEED} is current")
        return 0
    SEED.write_text(text, encoding="utf-8")
    print(f"wrote {SEED} ({len(json.loads(text)['entries'])} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
