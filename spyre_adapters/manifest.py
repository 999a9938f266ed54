"""Adapter manifests: one TOML file per adapter version, parsed into a frozen :class:`Manifest`.

A manifest says what an adapter bridges and where it may run; the implementation (named by
``entry_point``) only says whether it matches a model and how to change it. The keys are
documented with a worked example in ``manifests/README.md``; in short::

    schema_version = 1
    name = "rope-rotation"
    version = "1.0"
    kind = "scaffolding"              # or "permanent"
    summary = "RoPE as precomputed rotation matrices (no sin/cos, no slicing on device)"
    gaps = ["sin-cos", "rotate-half"]
    families = ["llama", "mistral"]
    stacks = ">=2025.12"              # packaging specifier over release versions
    retire_by = "2026.09"             # optional: keeping it after this release is an error
    entry_point = "spyre_adapters.library.rope:adapter"
    order = 50                        # optional, default 100: lower is applied first

An adapter written by ``spyre-adapters bridge`` says so and carries its evidence: one table
per ATen op it bridges (the op's gap, the candidate chosen, the releases where the candidate
was validated on the device against the CPU, and the inputs it was checked on)::

    generated = true                  # optional, default false
    [bridges."aten.histc.default"]
    candidate = "rewrite"             # decomposition | core-decomposition | ref | rewrite | host
    gap = "histc"                     # one of ``gaps``
    releases = ["2026.05", "2026.09"] # validated at (each admitted by ``stacks``)
    checked = ["float16[16] bins=4 min=0 max=3 (olmoe, captured)", "..."]

The lifecycle reads such an adapter's gaps through its ops (:meth:`Manifest.open_gaps`): a
bridge is needed at a release only while the release does not run one of its ops (lowered, or
moved to the host by the stack itself), so it retires as soon as a release runs them, even
when the op's gap (say the catch-all ``unlowered-op``) stays open for other ops. An op the
release refused by a rule of its gap on top of the op's own rule (casts to fp32 before
2026.07) retires with the gap's state instead.

Validation is complete, not first-error: :func:`load_manifests` collects every problem of every
file (unknown keys, wrong types, bad versions and specifiers, unknown gap ids, kind that does not
fit the gaps, an entry point that does not import or is not an adapter, an unknown ``retire_by``,
a ``stacks`` range that admits no release at all, a file outside the ``<name>/<version>.toml``
layout of a manifests tree) and raises one :class:`~spyre_adapters.errors.ManifestError` listing
them with file and key.
"""

from __future__ import annotations

import ast
import difflib
import enum
import hashlib
import importlib
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from spyre_adapters._locate import locate_module
from spyre_adapters.errors import ManifestError, Problem
from spyre_adapters.stacks import CatalogueLike, is_lasting
from spyre_sim.problems import read_toml_file

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable

else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable


__all__ = [
    "BRIDGE_CANDIDATES",
    "Bridge",
    "DEFAULT_ORDER",
    "MANIFEST_SCHEMA_VERSION",
    "AdapterKind",
    "Manifest",
    "load_manifest",
    "load_manifests",
    "op_lowered",
    "parse_manifest",
]

#: The manifest format this version of the package reads and writes.
MANIFEST_SCHEMA_VERSION = 1
#: ``order`` of a manifest that does not set one.
DEFAULT_ORDER = 100

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
#: The candidate forms a bridge may name (``spyre_adapters.library.op_bridge.CANDIDATES``).
BRIDGE_CANDIDATES = ("decomposition", "core-decomposition", "ref", "rewrite", "host")
#: The gap of an op that a release does not list: only the op's own rule names it.
CATCH_ALL_GAP = "unlowered-op"
_BRIDGE_KEYS = ("candidate", "gap", "releases", "checked")
_OP_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_REQUIRED = tuple(key for key in _KEYS if key not in _OPTIONAL)


class AdapterKind(enum.Enum):
    """``scaffolding`` bridges transitional gaps and retires; ``permanent`` bridges a lasting
    hardware property and never retires."""

    SCAFFOLDING = "scaffolding"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Bridge:
    """One ATen op a generated adapter bridges, with the evidence for its candidate.

    ``op`` is the overload (``"aten.histc.default"``), ``candidate`` the form chosen (one of
    :data:`BRIDGE_CANDIDATES`), ``gap`` the gap the op stops models at, ``releases`` the
    releases where the candidate was validated on the device against the CPU, ``checked``
    the inputs it was checked on (signatures and where they came from).
    """

    op: str
    candidate: str
    gap: str
    releases: tuple[str, ...]
    checked: tuple[str, ...]
    #: the release refused the op by a rule of its gap on top of the op's own rule (casts to
    #: fp32 before 2026.07: ``_to_copy`` lowers, the ``dtype-cast`` rule refuses some calls):
    #: derived on load, when a release the candidate was validated at lowers the op itself
    #: (never for :data:`CATCH_ALL_GAP`, which only an op's own rule names)
    by_rule: bool = False

    def lowered_at(self, release: Any) -> bool | None:
        """Whether ``release`` lowers the op (``native`` or ``decomposed``); ``None`` when the
        release object cannot say (it has no op rules) or when the op was refused by a rule of
        its gap rather than by its own rule (then the gap's state decides)."""
        if self.by_rule:
            return None
        return op_lowered(release, self.op)


def op_lowered(release: Any, op: str) -> bool | None:
    """Whether ``release``'s own rule for ``op`` (an overload name) runs it: ``native``,
    ``decomposed``, or a ``cpu-fallback`` (then the stack moves it to the host itself, as a
    host bridge would); ``None`` for a release object without op rules."""
    rule_of = getattr(release, "op_rule", None)
    if rule_of is None:
        return None
    packet, _, overload = op.rpartition(".")
    decision = rule_of(packet, overload).decision
    return str(getattr(decision, "value", decision)) in ("native", "decomposed", "cpu-fallback")


@dataclass(frozen=True)
class Manifest:
    """One adapter version, as declared by its manifest file.

    ``source`` is the file it was read from and ``sha256`` the hash of that file's bytes
    (both empty for a manifest built in code).
    """

    name: str
    version: Version
    kind: AdapterKind
    summary: str
    gaps: tuple[str, ...]
    families: tuple[str, ...]
    stacks: SpecifierSet
    entry_point: str
    retire_by: str | None = None
    order: int = DEFAULT_ORDER
    schema_version: int = MANIFEST_SCHEMA_VERSION
    source: str = ""
    sha256: str = ""
    generated: bool = False
    bridges: tuple[Bridge, ...] = ()
    after: tuple[str, ...] = ()  # adapters applied before this one (spyre_adapters.ordering)

    def open_gaps(self, release: Any) -> tuple[str, ...]:
        """The gaps of this adapter that are open at ``release`` (a release object with
        ``gap_open``). For an adapter with bridges, a gap counts as open only while some op
        bridged for it does not lower at the release (see the module docstring)."""
        gaps = [g for g in self.gaps if release.gap_open(g)]
        if not self.bridges:
            return tuple(gaps)
        still = []
        for gap in gaps:
            lowered = [b.lowered_at(release) for b in self.bridges if b.gap == gap]
            if not lowered or not all(lowered):
                still.append(gap)
        return tuple(still)

    @property
    def key(self) -> tuple[str, Version]:
        """``(name, version)``: unique in a registry."""
        return (self.name, self.version)

    @property
    def label(self) -> str:
        """``"name version"`` for messages."""
        return f"{self.name} {self.version}"

    def admits(self, release_version: Version) -> bool:
        """Whether the manifest's ``stacks`` specifier admits a release version."""
        return self.stacks.contains(release_version, prereleases=True)

    def load(self) -> Any:
        """Import and return the implementation named by ``entry_point``."""
        return _import_entry_point(self.entry_point)

    def implementation_file(self) -> Path | None:
        """The source file of the entry point's module, when it has one."""
        module_name = self.entry_point.partition(":")[0]
        module = sys.modules.get(module_name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin is None:
            spec = locate_module(module_name)
            origin = spec.origin if spec is not None else None
        if origin is None or not Path(origin).is_file():
            return None
        return Path(origin)


def _import_entry_point(entry_point: str) -> Any:
    module_name, _, attr_path = entry_point.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj


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
            _check_entry_point(check, entry_point, bridges)
        elif check_entry_point:
            _locate_entry_point(check, entry_point)

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
    """The ``[bridges."<op>"]`` tables, each checked (see the module docstring)."""
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


def _check_entry_point(check: _Checker, entry_point: str, bridges: Sequence[Bridge] = ()) -> None:
    from spyre_adapters.contract import Adapter  # imports torch: only when validating

    try:
        obj = _import_entry_point(entry_point)
    except Exception as exc:  # any import-time failure of third-party code is a finding
        check.problem(
            "entry_point",
            f"{entry_point!r} does not import: {type(exc).__name__}: {exc}",
        )
        return
    if not isinstance(obj, Adapter):
        missing = [m for m in ("matches", "apply") if not callable(getattr(obj, m, None))]
        check.problem(
            "entry_point",
            f"{entry_point!r} is a {type(obj).__name__}, not an adapter: it lacks "
            f"{' and '.join(f'{m}()' for m in missing)} (see spyre_adapters.contract.Adapter)",
        )
        return
    table = getattr(obj, "table", None)
    if bridges and isinstance(table, dict):
        declared = {b.op: b.candidate for b in bridges}
        if table != declared:
            check.problem(
                "bridges",
                f"the ops and candidates of {entry_point!r} ({table}) differ from the "
                f"manifest's [bridges] ({declared})",
            )


def _locate_entry_point(check: _Checker, entry_point: str) -> None:
    """The entry-point check of a process that runs no adapter: the module is found and binds
    the object's name at its top level, without importing the module (nor torch, which every
    implementation imports). Whether the object is an adapter is checked when it is loaded."""
    module_name, _, attr_path = entry_point.partition(":")
    attr = attr_path.split(".")[0]
    loaded = sys.modules.get(module_name)
    spec = None if loaded is not None else locate_module(module_name)
    if loaded is None and spec is None:
        check.problem(
            "entry_point",
            f"{entry_point!r} does not import: ModuleNotFoundError: "
            f"No module named {module_name!r}",
        )
        return
    if loaded is not None:
        bound: bool | None = hasattr(loaded, attr)
    else:
        assert spec is not None
        bound = _binds_at_top_level(spec.origin, attr)
    if bound is False:
        check.problem(
            "entry_point",
            f"{entry_point!r} does not import: AttributeError: module {module_name!r} has "
            f"no attribute {attr!r}",
        )


def _binds_at_top_level(origin: str | None, name: str) -> bool | None:
    """Whether the Python source at ``origin`` binds ``name`` at module level (``None``: not
    known, e.g. no source file or a module ``__getattr__``)."""
    if origin is None or not origin.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(origin).read_bytes(), filename=origin)
    except (OSError, SyntaxError, ValueError):
        return None  # the import check of a process that loads the adapter says more
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    if isinstance(child, ast.ExceptHandler):
                        pending.extend(child.body)
                    else:
                        pending.append(child)
    if "__getattr__" in names:
        return None
    return name in names


def _read(file: Traversable, where: str) -> tuple[dict[str, Any] | None, str, list[Problem]]:
    raw, doc, problems = read_toml_file(file, where)
    digest = hashlib.sha256(raw).hexdigest() if raw or doc is not None else ""
    return doc, digest, problems


def _layout_problems(
    manifest: Manifest, file: Traversable, folder: str, where: str
) -> list[Problem]:
    """Under a manifests tree, ``<name>/<version>.toml`` must agree with the content."""
    problems = []
    if folder != manifest.name:
        problems.append(
            Problem(
                where,
                "name",
                f"name {manifest.name!r} does not match the folder {folder!r} "
                f"(expected '<name>/<version>.toml')",
            )
        )
    stem = file.name.removesuffix(".toml")
    try:
        same_version = Version(stem) == manifest.version
    except InvalidVersion:
        same_version = False
    if not same_version:
        problems.append(
            Problem(
                where,
                "version",
                f"version {str(manifest.version)!r} does not match the file name {file.name!r} "
                f"(expected '<name>/<version>.toml')",
            )
        )
    return problems


def _tree_files(
    root: Traversable,
) -> tuple[list[tuple[Traversable, str | None]], list[Problem]]:
    """Every ``*.toml`` under ``root`` with its folder (``None`` for a file outside the
    ``<name>/<version>.toml`` layout: directly under ``root`` or deeper than one folder), and a
    problem for each file outside the layout (it is still read, so its own problems are
    reported too)."""
    files: list[tuple[Traversable, str | None]] = []
    stray: list[Traversable] = []
    for entry in root.iterdir():
        if entry.is_dir():
            for item in entry.iterdir():
                if item.is_file() and item.name.endswith(".toml"):
                    files.append((item, entry.name))
                elif item.is_dir():
                    stray.extend(_tomls_below(item))
        elif entry.is_file() and entry.name.endswith(".toml"):
            stray.append(entry)
    problems = [
        Problem(
            str(file),
            "",
            f"is outside the '<name>/<version>.toml' layout of the manifests folder {root}: "
            f"move it to {root}/<name>/<version>.toml (or out of the folder)",
        )
        for file in sorted(stray, key=str)
    ]
    files.extend((file, None) for file in stray)
    return sorted(files, key=lambda pair: str(pair[0])), problems


def _tomls_below(folder: Traversable) -> list[Traversable]:
    found: list[Traversable] = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found.extend(_tomls_below(entry))
        elif entry.is_file() and entry.name.endswith(".toml"):
            found.append(entry)
    return found


def load_manifest(
    path: Traversable | Path | str,
    catalogue: CatalogueLike,
    *,
    check_entry_point: bool = True,
    import_entry_point: bool = True,
) -> Manifest:
    """Load and validate one manifest file; raise :class:`ManifestError` with every problem."""
    return load_manifests(
        [path],
        catalogue,
        check_entry_point=check_entry_point,
        import_entry_point=import_entry_point,
    )[0]


def load_manifests(
    files: Iterable[Traversable | Path | str] | Traversable | Path | str,
    catalogue: CatalogueLike,
    *,
    check_entry_point: bool = True,
    import_entry_point: bool = True,
) -> list[Manifest]:
    """Load and validate manifests: a directory tree (``<name>/<version>.toml``) or files.

    All or nothing: when any file has a problem, :class:`ManifestError` lists the problems of
    every file and no manifest is returned. Two files declaring the same name and version are a
    problem too.

    ``import_entry_point=False`` checks each entry point without importing it (the module is
    found and binds the name), for processes that run no adapter: it keeps torch unloaded.
    """
    candidates: list[tuple[Traversable, str | None]]
    problems: list[Problem] = []
    if isinstance(files, (str, Path)) or not isinstance(files, Iterable):
        root = Path(files) if isinstance(files, str) else files
        if root.is_file():
            candidates = [(root, None)]
        else:
            candidates, problems = _tree_files(root)
    else:
        candidates = [(Path(f) if isinstance(f, str) else f, None) for f in files]
    manifests: list[Manifest] = []
    seen: dict[tuple[str, Version], str] = {}
    for file, folder in candidates:
        where = str(file)
        data, digest, read_problems = _read(file, where)
        if data is None:
            problems.extend(read_problems)
            continue
        manifest, found = parse_manifest(
            data,
            where=where,
            catalogue=catalogue,
            check_entry_point=check_entry_point,
            sha256=digest,
            import_entry_point=import_entry_point,
        )
        problems.extend(found)
        if manifest is None:
            continue
        if folder is not None:
            layout = _layout_problems(manifest, file, folder, where)
            if layout:
                problems.extend(layout)
                continue
        if manifest.key in seen:
            problems.append(
                Problem(
                    where,
                    "version",
                    f"adapter {manifest.name!r} version {manifest.version} is also declared in "
                    f"{seen[manifest.key]}",
                )
            )
            continue
        seen[manifest.key] = where
        manifests.append(manifest)
    if problems:
        raise ManifestError(problems)
    return manifests
