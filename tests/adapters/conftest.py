"""Fixtures of the spyre_adapters tests: a small catalogue of our own, test manifests, models.

The fake catalogue follows the release timeline of docs/STACK.md §5-6 for the gaps the test
manifests use, so the expectations in these tests are read off that table, not off the code.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

from spyre_adapters import Registry
from spyre_adapters.cli import main
from spyre_adapters.errors import UnknownReleaseError

DATA = Path(__file__).resolve().parent.parent / "data" / "manifests"
IMPL = DATA / "impl"

RELEASES = ("2025.12", "2026.02", "2026.03", "2026.05", "2026.06", "2026.07", "2026.08", "2026.09")

#: gap id -> (nature, release where it closes or None, release where it re-opens)
GAPS: dict[str, tuple[str, str | None]] = {
    "sin-cos": ("transitional", "2026.09"),
    "rotate-half": ("transitional", None),
    "offset-slice": ("transitional", "2026.06"),
    "dtype-cast": ("transitional", "2026.07"),
    "pow": ("transitional", "2026.03"),
    "tril-triu": ("transitional", None),  # tril stays a fallback
    "embedding": ("transitional", "2026.08"),
    "sdpa": ("transitional", "2026.03"),
    "sdpa-gqa": ("transitional", "2026.05"),
    "conv2d": ("transitional", "2026.06"),
    "masked-scatter": ("transitional", "2026.08"),
    "layernorm-nan": ("transitional", None),
    "mem-pool": ("regression", None),  # open only at 2026.08
    "stick-align": ("lasting", None),
    "sub-stick-head": ("lasting", None),
    "core-span": ("lasting", None),
    "no-inf": ("lasting", None),
    "fp32-storage": ("lasting", None),
    "static-shapes": ("lasting", None),
}


@dataclass(frozen=True)
class FakeNature:
    value: str


@dataclass(frozen=True)
class FakeGap:
    id: str
    nature: FakeNature


@dataclass(frozen=True)
class FakeRelease:
    name: str
    open_gaps: frozenset[str]

    @property
    def version(self) -> Version:
        return Version(self.name)

    def gap_open(self, gap_id: str) -> bool:
        return gap_id in self.open_gaps


@dataclass
class FakeCatalogue:
    releases: tuple[FakeRelease, ...]
    gaps: Mapping[str, FakeGap] = field(default_factory=dict)

    def release(self, name: str) -> FakeRelease:
        for release in self.releases:
            if release.name == name or release.version == _version_or_none(name):
                return release
        raise UnknownReleaseError(name, [r.name for r in self.releases])


def _version_or_none(name: str) -> Version | None:
    try:
        return Version(name)
    except InvalidVersion:
        return None


def _open_at(gap: str, release: str) -> bool:
    nature, closes = GAPS[gap]
    if gap == "mem-pool":
        return release == "2026.08"
    if nature == "lasting" or closes is None:
        return True
    return Version(release) < Version(closes)


def make_catalogue() -> FakeCatalogue:
    releases = tuple(
        FakeRelease(name, frozenset(g for g in GAPS if _open_at(g, name))) for name in RELEASES
    )
    gaps = {gid: FakeGap(gid, FakeNature(nature)) for gid, (nature, _) in GAPS.items()}
    return FakeCatalogue(releases, gaps)


@pytest.fixture(scope="session", autouse=True)
def _fake_impl_on_path() -> Iterator[None]:
    """The test manifests' entry points live in tests/data/manifests/impl."""
    sys.path.insert(0, str(IMPL))
    try:
        yield
    finally:
        sys.path.remove(str(IMPL))


@pytest.fixture
def catalogue() -> FakeCatalogue:
    return make_catalogue()


@pytest.fixture
def registry(catalogue: FakeCatalogue) -> Registry:
    reg = Registry(catalogue)
    reg.load_directory(DATA / "valid", source="test data")
    return reg


@pytest.fixture
def today() -> _dt.date:
    return _dt.date(2026, 11, 30)


# -- the CLI through main(argv) -----------------------------------------------------------------
@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.out)  # type: ignore[no-any-return]


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("SPYRE_ADAPTERS_DISABLE", "builtin")
    monkeypatch.setenv("NO_COLOR", "1")

    def invoke(*argv: str, manifests: Path | None = DATA / "valid") -> Result:
        capsys.readouterr()
        prefix = ["--manifests", str(manifests)] if manifests is not None else []
        code = main([*prefix, *argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


def statuses(document: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {a["name"]: f"{a['version']} {a['status']}" for a in document["adapters"]}
