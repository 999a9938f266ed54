"""Generated adapters: an op bridge and its evidence, written as a manifest and a module.

``spyre-adapters bridge`` ends with a table ``{op: candidate}`` for the ops it bridged. Each op
becomes its own adapter, ``bridge-<op>`` (``aten.histc.default`` -> ``bridge-histc``,
``aten.upsample_nearest2d.vec`` -> ``bridge-upsample-nearest2d-vec``), so that it retires on
its own when a release lowers that op, and serves every family that reaches the op. An
adapter version holds one candidate; where the first candidate that holds changes from one
release to the next (the host at 2026.05, a decomposition from 2026.06), each stretch of
releases is its own version, shipped side by side (:func:`plan_versions`).

A version is a :class:`GeneratedBridge`: its manifest (:func:`manifest_text`: ``generated =
true``, the gap, the candidate and the evidence, the ``stacks`` range from the first release
the candidate was validated at) and its implementation module (:func:`module_text`: one
:class:`~spyre_adapters.library.op_bridge_v2.OpBridge`, the form computed where the device
refuses the op, or the third form's for ``host-float32``: :func:`_form`).
:func:`write_builtin` writes versions into the built-in tree (``manifests/bridge-*/`` and
``spyre_adapters/library/bridge_*.py``), never over a version recorded as released;
:func:`package_files` lays them out as an installable third-party package (the layout of
``spyre-adapters new``, :mod:`spyre_adapters.enablement.skeletons`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from spyre_adapters.errors import SpyreAdaptersError

if TYPE_CHECKING:
    from spyre_adapters.enablement.op_samples import Sample
    from spyre_adapters.enablement.op_validation import Verdict
    from spyre_adapters.stacks import CatalogueLike
    from spyre_sim.catalogue import Release

__all__ = [
    "GeneratedBridge",
    "VersionPlan",
    "adapter_name",
    "manifest_text",
    "module_name",
    "module_text",
    "package_files",
    "plan_versions",
    "released_versions",
    "write_builtin",
]

#: ``order`` of generated bridges: after the hand-written adapters (they change modules; a
#: bridge only changes how single ops are computed).
ORDER = 300
#: At most this many input signatures are listed as evidence per op.
MAX_CHECKED = 24
#: :func:`plan_versions`' reason for a release that runs the op on the captured arguments.
NOT_NEEDED = "the release runs the op on the captured arguments: no bridge needed"


def adapter_name(op: str) -> str:
    """``aten.histc.default`` -> ``bridge-histc``; ``aten._grouped_mm.default`` ->
    ``bridge-grouped-mm``; ``aten.upsample_nearest2d.vec`` -> ``bridge-upsample-nearest2d-vec``;
    ``aten.index_put_.default`` -> ``bridge-index-put-inplace``."""
    namespace, packet, overload = op.split(".")
    words = [w for w in re.split(r"[_\W]+", packet.lower()) if w]
    if packet.endswith("_") and not packet.endswith("__"):
        words.append("inplace")  # index_put_ is not index_put
    if namespace != "aten":
        words.insert(0, namespace.lower())
    if overload != "default":
        words += [w for w in re.split(r"[_\W]+", overload.lower()) if w]
    return "bridge-" + "-".join(words)


def module_name(name: str, version: str) -> str:
    """``bridge-histc``, ``1.0.0`` -> ``bridge_histc``; other versions get a suffix
    (``bridge_histc_v1_1_0``), one module per version."""
    base = name.replace("-", "_")
    return base if version == "1.0.0" else f"{base}_v{version.replace('.', '_')}"


@dataclass(frozen=True)
class VersionPlan:
    """One candidate and the consecutive releases where it is the first that holds."""

    candidate: str
    releases: tuple[str, ...]
    verdicts: tuple[Verdict, ...]


def plan_versions(
    op: str,
    samples: Sequence[Sample],
    releases: Sequence[Release],
    *,
    layout_checks: bool = True,
    only: Sequence[str] | None = None,
) -> tuple[list[VersionPlan], dict[str, str]]:
    """For each release (oldest first) where the op refuses a captured sample, the first
    candidate that holds on ``samples`` (and their variants); consecutive releases with the
    same candidate make one plan. Returns the plans and, per release where none holds (or
    none is needed), why."""
    from spyre_adapters.enablement.bridge import choose_candidate, refuses
    from spyre_adapters.library.op_bridge import resolve_op

    overload = resolve_op(op)
    plans: list[VersionPlan] = []
    failed: dict[str, str] = {}
    previous: str | None = None
    for release in releases:
        if not refuses(overload, samples, release, layout_checks=layout_checks):
            failed[release.name] = NOT_NEEDED
            previous = None
            continue
        verdicts = choose_candidate(
            overload, samples, release, layout_checks=layout_checks, only=only
        )
        if not verdicts or not verdicts[-1].holds:
            failed[release.name] = "; ".join(f"{v.candidate}: {v.reason}" for v in verdicts)
            previous = None
            continue
        chosen = verdicts[-1]
        if previous is not None and plans and plans[-1].candidate == chosen.candidate:
            last = plans[-1]
            plans[-1] = VersionPlan(
                last.candidate, (*last.releases, release.name), (*last.verdicts, chosen)
            )
        else:
            plans.append(VersionPlan(chosen.candidate, (release.name,), (chosen,)))
        previous = chosen.candidate
    return plans, failed


@dataclass(frozen=True)
class GeneratedBridge:
    """One version of a generated bridge adapter (see the module docstring)."""

    name: str
    version: str
    op: str
    gap: str
    lasting: bool
    candidate: str
    releases: tuple[str, ...]
    stacks: str
    families: tuple[str, ...]
    checked: tuple[str, ...]
    package: str = "spyre_adapters.library"

    @property
    def module(self) -> str:
        return module_name(self.name, self.version)

    @property
    def entry_point(self) -> str:
        return f"{self.package}.{self.module}:adapter"

    @property
    def kind(self) -> str:
        return "permanent" if self.lasting else "scaffolding"


_CANDIDATE_WORDS = {
    "decomposition": "its decomposition from PyTorch's decomposition table",
    "core-decomposition": "its decomposition from PyTorch's core ATen table",
    "ref": "its Python reference (torch._refs)",
    "rewrite": "a rewrite into ops the release lowers",
    "host": "the host (its inputs and results moved explicitly: two counted transfers)",
    "host-float32": (
        "the host in float32 (its inputs moved and widened, its results rounded back: two"
        " counted transfers)"
    ),
}


def versions_of(
    op: str,
    gap: str,
    lasting: bool,
    plans: Sequence[VersionPlan],
    families: Mapping[str, Sequence[str]],
    catalogue: CatalogueLike,
    *,
    failed: Mapping[str, str] | None = None,
    first_version: str = "1.0.0",
    package: str = "spyre_adapters.library",
) -> list[GeneratedBridge]:
    """The adapter versions of ``plans`` (oldest releases first: 1.0.0, 1.1.0, ...). Each
    version's ``stacks`` starts at its first release and ends before the next plan's first
    release, or before the first later release where the op is refused and no candidate holds
    (``failed``, from :func:`plan_versions`); otherwise it is open above, and the lifecycle
    retires it where a release runs the op. ``families`` maps a release to the families that
    ran and matched the CPU there with the op bridged; a version lists those of its releases."""
    names = [r.name for r in catalogue.releases]
    blocked = [r for r, why in (failed or {}).items() if why != NOT_NEEDED]
    major, minor, _patch = (int(p) for p in first_version.split("."))
    out = []
    for index, plan in enumerate(plans):
        stacks = f">={plan.releases[0]}"
        ends = [plans[index + 1].releases[0]] if index + 1 < len(plans) else []
        last = names.index(plan.releases[-1])
        ends += [r for r in names[last + 1 :] if r in blocked][:1]
        if ends:
            stacks += f",<{min(ends, key=names.index)}"
        checked: list[str] = []
        for verdict in plan.verdicts:
            for check in verdict.checks:
                if not check.counts:
                    continue
                line = f"{check.signature} ({check.label})"
                if line not in checked:
                    checked.append(line)
        out.append(
            GeneratedBridge(
                name=adapter_name(op),
                version=f"{major}.{minor + index}.0",
                op=op,
                gap=gap,
                lasting=lasting,
                candidate=plan.candidate,
                releases=plan.releases,
                stacks=stacks,
                families=tuple(sorted({f for r in plan.releases for f in families.get(r, ())})),
                checked=tuple(checked[:MAX_CHECKED]),
                package=package,
            )
        )
    return out


def manifest_text(bridge: GeneratedBridge) -> str:
    """The manifest (TOML) of one generated version."""
    document: dict[str, Any] = {
        "schema_version": 1,
        "name": bridge.name,
        "version": bridge.version,
        "kind": bridge.kind,
        "generated": True,
        "summary": (
            f"Generated op bridge: {bridge.op} computed by "
            f"{_CANDIDATE_WORDS.get(bridge.candidate, bridge.candidate)}, validated on the "
            "device against the CPU on the inputs listed below."
        ),
        "gaps": [bridge.gap],
        "families": list(bridge.families),
        "stacks": bridge.stacks,
        "entry_point": bridge.entry_point,
        "order": ORDER,
        "bridges": {
            bridge.op: {
                "candidate": bridge.candidate,
                "gap": bridge.gap,
                "releases": list(bridge.releases),
                "checked": list(bridge.checked),
            }
        },
    }
    header = (
        "# Generated by `spyre-adapters bridge`: the candidate was validated on the emulated\n"
        "# device against the CPU at each release of [bridges].releases. Regenerate, do not edit.\n"
    )
    return header + tomli_w.dumps(document)


def module_text(bridge: GeneratedBridge) -> str:
    """The implementation module of one generated version."""
    releases = ", ".join(bridge.releases)
    module = _rewrite_module(bridge)
    package, _, leaf = module.rpartition(".")
    registers = f"from {package} import {leaf}  # noqa: F401  (registers the rewrite)\n"
    registers = registers if module else ""
    form = _form(bridge.candidate)
    defined = "op_bridge_v3" if form == "op_bridge_v3" else "op_bridge"
    return f'''"""Generated by ``spyre-adapters bridge``: ``{bridge.name}`` {bridge.version}.

Bridges ``{bridge.op}`` (gap ``{bridge.gap}``) with the ``{bridge.candidate}`` candidate of
:mod:`spyre_adapters.library.{defined}` where the device refuses it
(:mod:`spyre_adapters.library.{form}`), validated on the emulated device against the CPU at
{releases} (the evidence is in the manifest). Regenerate it rather than editing it.
"""

from __future__ import annotations

{registers}from spyre_adapters.library.{form} import OpBridge

__all__ = ["adapter"]

adapter = OpBridge({{{json.dumps(bridge.op)}: {json.dumps(bridge.candidate)}}})
'''


def _form(candidate: str) -> str:
    """The op-bridge module a generated version imports its ``OpBridge`` from: the second form
    (:mod:`spyre_adapters.library.op_bridge_v2`) for the first form's candidates, so that a
    version planned again is the released one, text for text; the third
    (:mod:`spyre_adapters.library.op_bridge_v3`) for the candidate only it has
    (``host-float32``). Both install their candidates as the device's refusal handlers."""
    from spyre_adapters.library import op_bridge

    return "op_bridge_v2" if candidate in op_bridge.CANDIDATES else "op_bridge_v3"


def _rewrite_module(bridge: GeneratedBridge) -> str:
    """The module that registers ``bridge``'s rewrite when it is not the op bridge's own
    table (:mod:`spyre_adapters.library._op_rewrites`, which the op bridge imports), else
    ``""``: a generated module imports it so that its rewrite is there at run time."""
    if bridge.candidate != "rewrite":
        return ""
    from spyre_adapters.library._op_rewrites import REWRITES

    function = REWRITES.get(bridge.op)
    module = getattr(function, "__module__", "")
    return "" if module in ("", "spyre_adapters.library._op_rewrites") else module


class GenerationError(SpyreAdaptersError):
    """A generated version cannot be written (``path``: where; the message says why)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot write {path}: {reason}")


def released_versions(record: Path) -> set[tuple[str, str]]:
    """``(name, version)`` of each version recorded in ``record`` (``manifests/released.sha256``)."""
    if not record.is_file():
        return set()
    found = set()
    for line in record.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version, *_ = line.split()
            found.add((name, version))
    return found


def write_builtin(bridges: Sequence[GeneratedBridge], manifests: Path, library: Path) -> list[Path]:
    """Write each version's manifest under ``manifests/<name>/<version>.toml`` and module under
    ``library/<module>.py``. A version recorded in ``manifests/released.sha256`` is never
    rewritten with other content (a released version is immutable): that raises
    :class:`GenerationError` before anything is written."""
    released = released_versions(manifests / "released.sha256")
    planned: list[tuple[Path, str]] = []
    for bridge in bridges:
        files = [
            (manifests / bridge.name / f"{bridge.version}.toml", manifest_text(bridge)),
            (library / f"{bridge.module}.py", module_text(bridge)),
        ]
        for path, text in files:
            unchanged = path.is_file() and path.read_text("utf-8") == text
            if (bridge.name, bridge.version) in released and not unchanged:
                raise GenerationError(
                    path,
                    f"{bridge.name} {bridge.version} is released; put the change in a new "
                    "version (manifests/README.md, 'Releasing a new version of an adapter')",
                )
        planned.extend(files)
    written = []
    from spyre_adapters._outputs import write_text

    for path, text in planned:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
        written.append(path)
    return written


_TEST = '''"""The generated op bridges of this package: the adapted model computes what the stock model
computes on the CPU, and runs and matches the CPU on the emulated device at stack {release}.

Needs this package installed (``pip install -e .``) for the device test: it applies the adapters
the installed plugins resolve, as ``pytest --spyre`` does.
"""

from __future__ import annotations

import copy

import pytest
import torch

from spyre_adapters import default_registry
from spyre_adapters.contract import ModelEdit
from spyre_adapters.enablement.families import build_family
from spyre_adapters.enablement.triage import triage
{imports}

ADAPTERS = {{{adapters}}}
#: The model types the bridges were verified on, and the release of the device test.
FAMILIES: list[str] = {families}
RELEASE = {release}


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_same_output_as_the_stock_model_on_the_cpu(model_type: str, name: str) -> None:
    built = build_family(model_type)
    model = copy.deepcopy(built.model)
    ADAPTERS[name].apply(model, ModelEdit(model))
    torch.testing.assert_close(built.run(model), built.reference)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_runs_and_matches_the_cpu_on_the_device(model_type: str) -> None:
    assert all(name.split()[0] in default_registry() for name in ADAPTERS), (
        "install this package first: pip install -e ."
    )
    result = triage(build_family(model_type), RELEASE)
    assert result.category.enabled, result.detail
'''

_PLUGIN = '''"""The ``spyre_adapters`` plugin of this package (entry point ``{package}``): registers the
manifests under ``{package}/manifests`` (``<name>/<version>.toml``)."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from spyre_adapters import hookimpl

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry


@hookimpl
def spyre_adapters_register(registry: Registry) -> None:
    """Register the manifests shipped in this package."""
    registry.load_directory(files("{package}") / "manifests")
'''


def package_files(
    bridges: Sequence[GeneratedBridge],
    *,
    package: str,
    family: str,
    release: str,
    requires: str = "spyre-adapters",
) -> dict[str, str]:
    """An installable distribution holding ``bridges`` (their ``package`` must be
    ``package``): the layout of ``spyre-adapters new`` with one manifest and module per
    version and a test over every bridge."""
    from spyre_adapters.enablement.skeletons import AdapterPackage
    from spyre_adapters.enablement.skeletons import package_files as skeleton_files

    spec = AdapterPackage(
        name=bridges[0].name,
        gaps=tuple(sorted({b.gap for b in bridges})),
        families=(family,),
        release=release,
        package=package,
        summary=f"Op bridges generated by spyre-adapters bridge for {family} at {release}.",
        requires=requires,
    )
    first = manifest_text(bridges[0])
    files = dict(skeleton_files(spec, first))
    source = f"src/{package}"
    for path in [p for p in files if p.startswith(f"{source}/manifests/")]:
        del files[path]
    del files[f"{source}/adapter.py"]
    files[f"{source}/plugin.py"] = _PLUGIN.format(package=package)
    for bridge in bridges:
        files[f"{source}/manifests/{bridge.name}/{bridge.version}.toml"] = manifest_text(bridge)
        files[f"{source}/{bridge.module}.py"] = module_text(bridge)
    imports = "\n".join(f"from {package}.{b.module} import adapter as {b.module}" for b in bridges)
    adapters = ", ".join(f"{json.dumps(b.name + ' ' + b.version)}: {b.module}" for b in bridges)
    families = sorted({f for b in bridges for f in b.families} | {family})
    files[f"tests/test_{package}.py"] = _TEST.format(
        imports=imports,
        adapters=adapters,
        families=json.dumps(families),
        release=json.dumps(release),
    )
    files["README.md"] = (
        f"# {package.replace('_', '-')}\n\nOp bridges generated by `spyre-adapters bridge {family} "
        f"--stack {release}`: one adapter per op, each validated on the emulated device against "
        "the CPU (the evidence is in each manifest).\n\n"
        + "\n".join(
            f"- `{b.name}` {b.version}: `{b.op}` ({b.candidate}, gap `{b.gap}`, stacks "
            f"`{b.stacks}`)"
            for b in bridges
        )
        + "\n\nInstall with `pip install -e .`, check with `spyre-adapters list`, test with "
        "`pytest tests/`.\n"
    )
    return files


def families_of(results: Mapping[str, Sequence[str]], op: str) -> list[str]:
    """The families whose bridge runs used ``op`` (``results``: family -> ops)."""
    return sorted(f for f, ops in results.items() if op in ops)
