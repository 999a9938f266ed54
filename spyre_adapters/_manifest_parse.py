"""Validation of one manifest document: :func:`parse_manifest` checks every key of a parsed
TOML table (the keys and rules are documented in :mod:`spyre_adapters.manifest`) against the
stack catalogue and returns the :class:`~spyre_adapters.manifest.Manifest` or every problem
found, never the first one only. The adapter-name rule lives here too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from spyre_adapters._entry_points import entry_point_problems, located_problems
from spyre_adapters._manifest_model import (
    BRIDGE_CANDIDATES,
    CATCH_ALL_GAP,
    DEFAULT_ORDER,
    MANIFEST_SCHEMA_VERSION,
    AdapterKind,
    Bridge,
    Manifest,
    op_lowered,
)
from spyre_adapters.errors import Problem
from spyre_adapters.stacks import CatalogueLike, is_lasting

__all__ = ["parse_manifest"]

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_KEYS = (
    "schema_version",
    "name",
    "version",
    "kind",
    "summary",
    "gaps",
    "families",
    "stacks",
    "retire_by",
    "entry_point",
    "order",
    "generated",
    "bridges",
    "after",
)
_OPTIONAL = ("retire_by", "order", "generated", "bridges", "after")
_BRIDGE_KEYS = ("candidate", "gap", "releases", "checked")
_OP_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_REQUIRED = tuple(key for key in _KEYS if key not in _OPTIONAL)


def _describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


class _Checker:
    """Collects the problems of one manifest document."""

    def __init__(self, where: str, data: Mapping[str, Any]) -> None:
        self.where = where
        self.data = data
        self.problems: list[Problem] = []

    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.where, key, message))

    def string(self, key: str) -> str | None:
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, str):
            self.problem(key, f"expected a string, got {_describe(value)}")
            return None
        if not value.strip():
            self.problem(key, "must not be empty")
            return None
        return value

    def strings(self, key: str) -> tuple[str, ...] | None:
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(key, f"expected a list of strings, got {_describe(value)}")
            return None
        if len(set(value)) != len(value):
            dupes = sorted({v for v in value if value.count(v) > 1})
            self.problem(key, f"lists {', '.join(map(repr, dupes))} more than once")
        return tuple(value)

    def integer(self, key: str) -> int | None:
        if key not in self.data:
            return None
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"expected an integer, got {_describe(value)}")
            return None
        return value


def parse_manifest(
    data: Mapping[str, Any],
    *,
    where: str,
    catalogue: CatalogueLike,
    check_entry_point: bool = True,
    sha256: str = "",
    import_entry_point: bool = True,
) -> tuple[Manifest | None, list[Problem]]:
    """Validate one parsed manifest document; return the manifest (or ``None``) and every
    problem found. ``where`` names the file in problem messages."""
    check = _Checker(where, data)

    for key in data:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(_KEYS)}"
            check.problem(key, f"unknown key{hint}")
    for key in _REQUIRED:
        if key not in data:
            check.problem(key, "required key is missing")

    schema = check.integer("schema_version")
    if schema is not None and schema != MANIFEST_SCHEMA_VERSION:
        check.problem(
            "schema_version",
            f"unsupported schema version {schema} (this spyre-adapters reads "
            f"{MANIFEST_SCHEMA_VERSION}; upgrade spyre-adapters or rewrite the manifest)",
        )

    name = check.string("name")
    if name is not None and not _NAME.match(name):
        check.problem(
            "name",
            f"{name!r} is not a valid adapter name (lower-case letters, digits and single "
            f"hyphens, e.g. 'rope-rotation')",
        )
        name = None

    version: Version | None = None
    version_text = check.string("version")
    if version_text is not None:
        try:
            version = Version(version_text)
        except InvalidVersion:
            check.problem("version", f"{version_text!r} is not a PEP 440 version (e.g. '1.0')")

    kind: AdapterKind | None = None
    kind_text = check.string("kind")
    if kind_text is not None:
        try:
            kind = AdapterKind(kind_text)
        except ValueError:
            check.problem("kind", f"{kind_text!r} is not one of 'scaffolding', 'permanent'")

    summary = check.string("summary")
    families = check.strings("families")

    stacks: SpecifierSet | None = None
    stacks_text = check.string("stacks")
    if stacks_text is not None:
        try:
            stacks = SpecifierSet(stacks_text)
        except InvalidSpecifier:
            check.problem(
                "stacks",
                f"{stacks_text!r} is not a version specifier over releases (e.g. '>=2026.02,<2026.09')",
            )
        else:
            empty = _empty_range(stacks)
            if empty is not None:
                check.problem(
                    "stacks",
                    f"{stacks_text!r} admits no release at all ({empty}); write the lower bound "
                    f"first and below the upper one, e.g. '>=2026.02,<2026.09'",
                )
                stacks = None

    gaps = check.strings("gaps")
    if gaps is not None:
        _check_gaps(check, gaps, kind, catalogue)

    retire_by = check.string("retire_by")
    if retire_by is not None:
        names = [r.name for r in catalogue.releases]
        if retire_by not in names:
            check.problem(
                "retire_by",
                f"{retire_by!r} is not a release of the stack catalogue (known: {', '.join(names)})",
            )
            retire_by = None
        elif kind is AdapterKind.PERMANENT:
            check.problem(
                "retire_by",
                f"a permanent adapter is never retired; remove retire_by = {retire_by!r} or make "
                f"the adapter kind 'scaffolding'",
            )

    order = check.integer("order")
    after = check.strings("after") or ()
    for other in after:
        if not _NAME.match(other) or other == name:
            what = "the adapter itself" if other == name else "not a valid adapter name"
            check.problem("after", f"{other!r} is {what}; list the adapters applied before it")

    generated = False
    if "generated" in data:
        if isinstance(data["generated"], bool):
            generated = data["generated"]
        else:
            check.problem(
                "generated", f"expected true or false, got {_describe(data['generated'])}"
            )
    bridges = _bridges(check, data, gaps, stacks, catalogue)
    if generated and "bridges" not in data:
        check.problem(
            "bridges",
            "a generated adapter (generated = true) must carry its evidence: one "
            '[bridges."<op>"] table per op it bridges (candidate, gap, releases, checked)',
        )

    entry_point = check.string("entry_point")
    if entry_point is not None:
        if not _ENTRY_POINT.match(entry_point):
            check.problem(
                "entry_point",
                f"{entry_point!r} is not of the form 'package.module:object'",
            )
            entry_point = None
        elif check_entry_point and import_entry_point:
            for key, message in entry_point_problems(entry_point, bridges):
                check.problem(key, message)
        elif check_entry_point:
            for key, message in located_problems(entry_point):
                check.problem(key, message)

    if check.problems:
        return None, check.problems
    assert name is not None
    assert version is not None
    assert kind is not None
    assert summary is not None
    assert gaps is not None
    assert families is not None
    assert stacks is not None
    assert entry_point is not None
    assert schema is not None
    manifest = Manifest(
        name=name,
        version=version,
        kind=kind,
        summary=summary,
        gaps=gaps,
        families=families,
        stacks=stacks,
        entry_point=entry_point,
        retire_by=retire_by,
        order=DEFAULT_ORDER if order is None else order,
        schema_version=schema,
        source=where,
        sha256=sha256,
        generated=generated,
        bridges=bridges,
        after=after,
    )
    return manifest, []


def _bridges(
    check: _Checker,
    data: Mapping[str, Any],
    gaps: Sequence[str] | None,
    stacks: SpecifierSet | None,
    catalogue: CatalogueLike,
) -> tuple[Bridge, ...]:
    """The ``[bridges."<op>"]`` tables, each checked (see :mod:`spyre_adapters.manifest`)."""
    if "bridges" not in data:
        return ()
    tables = data["bridges"]
    if not isinstance(tables, dict) or not tables:
        check.problem(
            "bridges",
            f'expected one or more [bridges."<op>"] tables, got {_describe(tables)}',
        )
        return ()
    releases = {r.name: r for r in catalogue.releases}
    found: list[Bridge] = []
    for op, table in tables.items():
        key = f"bridges.{op}"
        if not _OP_NAME.match(op):
            check.problem(key, f"{op!r} is not an ATen overload name (e.g. 'aten.histc.default')")
            continue
        if not isinstance(table, dict):
            check.problem(key, f"expected a table, got {_describe(table)}")
            continue
        problems_before = len(check.problems)
        for name in table:
            if name not in _BRIDGE_KEYS:
                check.problem(
                    f"{key}.{name}", f"unknown key; known keys: {', '.join(_BRIDGE_KEYS)}"
                )
        for name in _BRIDGE_KEYS:
            if name not in table:
                check.problem(f"{key}.{name}", "required key is missing")
        sub = _Checker(check.where, table)
        candidate = sub.string("candidate")
        if candidate is not None and candidate not in BRIDGE_CANDIDATES:
            sub.problem(
                "candidate",
                f"{candidate!r} is not a bridge candidate (known: {', '.join(BRIDGE_CANDIDATES)})",
            )
        gap = sub.string("gap")
        if gap is not None and gaps is not None and gap not in gaps:
            sub.problem("gap", f"{gap!r} is not one of the adapter's gaps ({', '.join(gaps)})")
        validated = sub.strings("releases")
        if validated is not None and not validated:
            sub.problem("releases", "must list at least one release the candidate was validated at")
        for name in validated or ():
            release = releases.get(name)
            if release is None:
                sub.problem(
                    "releases",
                    f"{name!r} is not a release of the stack catalogue (known: "
                    f"{', '.join(releases)})",
                )
            elif stacks is not None and not stacks.contains(release.version, prereleases=True):
                sub.problem(
                    "releases",
                    f"{name!r} is outside the adapter's stacks {str(stacks)!r}: a bridge is "
                    "validated where it may run",
                )
        checked = sub.strings("checked")
        if checked is not None and not checked:
            sub.problem("checked", "must list the inputs the candidate was checked on")
        for problem in sub.problems:
            check.problem(f"{key}.{problem.key}", problem.message)
        if len(check.problems) == problems_before:
            assert candidate is not None
            assert gap is not None
            assert validated is not None
            assert checked is not None
            # `unlowered-op` is named only by an op's own rule: where that rule lowers the op
            # now (a catalogue correction), the bridge is not needed there
            by_rule = gap != CATCH_ALL_GAP and any(
                op_lowered(releases[name], op) for name in validated if name in releases
            )
            found.append(Bridge(op, candidate, gap, tuple(validated), tuple(checked), by_rule))
    if gaps is not None and found and len(found) == len(tables):
        named = {b.gap for b in found}
        for gap in gaps:
            if gap not in named:
                check.problem(
                    "gaps",
                    f"{gap!r} is bridged by none of the adapter's [bridges] ops: list only the "
                    "gaps its ops stop models at",
                )
    return tuple(found)


def _bound(spec: Specifier) -> tuple[str, Version] | None:
    """``("lower"|"upper"|"exact", version)`` for a plain comparison, else ``None``."""
    if spec.version.endswith(".*"):
        return None
    version = Version(spec.version)
    if spec.operator in (">=", ">"):
        return ("lower", version)
    if spec.operator in ("<=", "<"):
        return ("upper", version)
    if spec.operator in ("==", "==="):
        return ("exact", version)
    return None


def _empty_range(stacks: SpecifierSet) -> str | None:
    """Why ``stacks`` can admit no version (an inverted or contradictory range), or ``None``."""
    specs = list(stacks)
    bounds = [(spec, b) for spec in specs if (b := _bound(spec)) is not None]
    for spec, (kind, version) in bounds:
        if kind == "exact" and not stacks.contains(version, prereleases=True):
            return f"{spec} contradicts the rest of the range"
    lowers = [(spec, v) for spec, (kind, v) in bounds if kind == "lower"]
    uppers = [(spec, v) for spec, (kind, v) in bounds if kind == "upper"]
    for low_spec, low in lowers:
        for up_spec, up in uppers:
            inclusive = low_spec.operator == ">=" and up_spec.operator == "<="
            if low > up or (low == up and not inclusive):
                return f"{low_spec} and {up_spec} leave an empty range"
    return None


def _check_gaps(
    check: _Checker,
    gaps: Sequence[str],
    kind: AdapterKind | None,
    catalogue: CatalogueLike,
) -> None:
    if not gaps:
        check.problem("gaps", "must list at least one gap id (an adapter bridges something)")
        return
    known = list(catalogue.gaps)
    unknown = [g for g in gaps if g not in catalogue.gaps]
    for gap in unknown:
        close = difflib.get_close_matches(gap, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known))}"
        check.problem("gaps", f"unknown gap id {gap!r} ({hint})")
    valid = [g for g in gaps if g in catalogue.gaps]
    if unknown or kind is None:
        return
    lasting = [g for g in valid if is_lasting(catalogue, g)]
    if kind is AdapterKind.PERMANENT and not lasting:
        check.problem(
            "gaps",
            f"a permanent adapter must bridge a lasting gap, but {', '.join(map(repr, valid))} "
            f"{'is' if len(valid) == 1 else 'are all'} transitional; make it kind = 'scaffolding'",
        )
    if kind is AdapterKind.SCAFFOLDING and len(lasting) == len(valid):
        check.problem(
            "gaps",
            f"a scaffolding adapter must bridge a transitional gap, but "
            f"{', '.join(map(repr, valid))} {'is' if len(valid) == 1 else 'are all'} lasting "
            f"(never closed, so it could never retire); make it kind = 'permanent'",
        )
