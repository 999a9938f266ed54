"""Skeletons of new adapters: a manifest, and a complete third-party adapter package.

:func:`manifest_skeleton` is the manifest (TOML text) that ``triage --suggest-manifest``
prints for a gap no adapter bridges. :func:`package_files` is what ``spyre-adapters new``
writes: an installable distribution that registers its adapter the way the built-ins do
(an entry point in group ``spyre_adapters`` naming a module with the
``spyre_adapters_register`` hook, which loads ``<package>/manifests/<name>/<version>.toml``)::

    pyproject.toml                           distribution, entry point, package data
    README.md                                what to do next
    src/<package>/__init__.py
    src/<package>/plugin.py                  the hook: registers src/<package>/manifests
    src/<package>/adapter.py                 the implementation; declines every model until
                                             matches() and apply() are written
    src/<package>/manifests/<name>/0.1.0.toml
    tests/test_<package>.py                  the adapted model computes what the stock one
                                             does on the CPU, and runs on the device (each
                                             skips while the adapter declines the family)

Installed as is (``pip install ./DIR``), the package lists in ``spyre-adapters list`` and
changes nothing else: an adapter that matches no model is never applied.

Every TOML file is written by a TOML library (``tomli_w``), so any value (quotes, newlines, any
Unicode) reads back exactly as given. Importing this module imports neither torch nor
Transformers.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tomli_w
from packaging.version import Version

if TYPE_CHECKING:
    from spyre_adapters.enablement.results import GapHit

__all__ = ["AdapterPackage", "manifest_skeleton", "package_files", "suggest_manifest"]

#: The comment opening every manifest skeleton.
_HEADER = (
    "# Skeleton written by spyre-adapters: implement the entry point, verify the families,\n"
    "# then list only the families it was verified on.\n"
)


def manifest_skeleton(
    name: str,
    gaps: Sequence[str],
    families: Sequence[str],
    release: str,
    *,
    kind: str | None = None,
    entry_point: str | None = None,
    summary: str | None = None,
) -> str:
    """A manifest (TOML text) for a new adapter ``name`` bridging ``gaps``, verified on nothing
    yet but meant for ``families``, from ``release`` on. ``kind`` defaults to ``permanent``
    when every gap is lasting, else ``scaffolding`` (with ``retire_by`` and an upper ``stacks``
    bound at the first release closing every gap, when the catalogue knows one)."""
    from spyre_sim.catalogue import builtin_catalogue

    catalogue = builtin_catalogue()
    infos = [catalogue.gaps.get(g) for g in gaps]
    lasting = bool(infos) and all(i is not None and i.nature.value == "lasting" for i in infos)
    kind = kind or ("permanent" if lasting else "scaffolding")
    closes: str | None = None
    if kind == "scaffolding":
        closing = [catalogue.first_closing(g, release) for g in gaps if g in catalogue.gaps]
        if closing and len(closing) == len(gaps) and all(closing):
            closes = max((c for c in closing if c), key=lambda c: Version(c))
    titles = ", ".join(
        f"`{g}` ({i.title})" if i is not None else f"`{g}`"
        for g, i in zip(gaps, infos, strict=True)
    )
    module = name.replace("-", "_").replace(".", "_")
    document: dict[str, Any] = {
        "schema_version": 1,
        "name": name,
        "version": "0.1.0",
        "kind": kind,
        "summary": summary or f"Bridges {titles}.",
        "gaps": list(gaps),
        "families": list(families),
        "stacks": f">={release}" + (f",<{closes}" if closes else ""),
    }
    if closes:
        document["retire_by"] = closes
    document["entry_point"] = entry_point or f"my_adapters.{module}:adapter"
    return _HEADER + tomli_w.dumps(document)


def suggest_manifest(gap: str, family: str, release: str, hit: GapHit | None = None) -> str:
    """A manifest skeleton (TOML text) for a new adapter bridging ``gap`` for ``family``."""
    where = ""
    if hit is not None:
        where = f" Met at {hit.op or 'an op'} in {hit.module_path or 'the model'} ({family})."
    from spyre_sim.catalogue import builtin_catalogue

    name = f"{gap}-{family}".replace("_", "-").lower()
    info = builtin_catalogue().gaps.get(gap)
    title = f" ({info.title})" if info is not None else ""
    return manifest_skeleton(
        name, [gap], [family], release, summary=f"Bridges `{gap}`{title}.{where}"
    )


@dataclass(frozen=True)
class AdapterPackage:
    """What a new adapter package is called and what its adapter is for.

    ``name`` is the adapter (a manifest name); ``package`` the import package (default
    :meth:`default_package`); ``release`` the first release the adapter is for and the one its
    device test runs at; ``requires`` the ``spyre-adapters`` requirement of the distribution.
    """

    name: str
    gaps: tuple[str, ...]
    families: tuple[str, ...]
    release: str
    package: str
    kind: str | None = None
    summary: str | None = None
    requires: str = "spyre-adapters"

    @staticmethod
    def default_package(name: str) -> str:
        """``spyre_adapter_<name>`` with dashes as underscores (always an identifier)."""
        return "spyre_adapter_" + name.replace("-", "_")

    @property
    def distribution(self) -> str:
        """The distribution name: the package with dashes (``spyre-adapter-rope-fix``)."""
        return self.package.replace("_", "-")

    @property
    def entry_point(self) -> str:
        """The manifest's ``entry_point``."""
        return f"{self.package}.adapter:adapter"

    @property
    def class_name(self) -> str:
        """The implementation class: ``RopeFixAdapter`` for ``rope-fix``."""
        words = "".join(part.capitalize() for part in self.name.split("-"))
        return ("Adapter" if words[:1].isdigit() else "") + words + "Adapter"

    def problems(self) -> list[str]:
        """What makes the names unusable (empty when they are fine)."""
        found = []
        if not self.package.isidentifier() or keyword.iskeyword(self.package):
            found.append(f"package {self.package!r} is not a Python identifier")
        return found


def _pyproject(spec: AdapterPackage, summary: str) -> str:
    document = {
        "build-system": {
            "requires": ["setuptools>=69"],
            "build-backend": "setuptools.build_meta",
        },
        "project": {
            "name": spec.distribution,
            "version": "0.1.0",
            "description": " ".join(summary.split()),
            "readme": "README.md",
            "requires-python": ">=3.10",
            "dependencies": [spec.requires],
            "entry-points": {"spyre_adapters": {spec.package: f"{spec.package}.plugin"}},
        },
        "tool": {
            "setuptools": {
                "packages": {"find": {"where": ["src"]}},
                "package-data": {spec.package: ["manifests/*/*.toml"]},
            }
        },
    }
    return tomli_w.dumps(document)


_PLUGIN = '''\
"""The ``spyre_adapters`` plugin of this package (entry point ``{package}``).

Registers every manifest under ``{package}/manifests`` (``<name>/<version>.toml``) through
the hook the built-in adapters use; ``SPYRE_ADAPTERS_DISABLE={package}`` turns it off.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from spyre_adapters import hookimpl

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry


@hookimpl
def spyre_adapters_register(registry: Registry) -> None:
    """Register the manifests shipped in this package."""
    registry.load_directory(files({package_q}) / "manifests")
'''

_ADAPTER = '''\
"""The ``{name}`` adapter (manifest: ``manifests/{name}/0.1.0.toml``; gaps: {gaps}).

Until :meth:`{cls}.matches` and :meth:`{cls}.apply` are written it declines every model,
so installing the package changes no model. The contract (``spyre_adapters.contract``):
``matches`` says whether the model has what the adapter rewrites and must not change it;
``apply`` changes the model only through ``edit`` (replace a module, set an attribute, bind a
forward), so a failure rolls back and ``spyre_adapters.restore`` undoes it. An adapter changes
how the model computes on the device, never what it computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

    from spyre_adapters.contract import ModelEdit

__all__ = ["{cls}", "adapter"]


class {cls}:
    """Bridges {gaps} (see ``spyre-adapters stacks``)."""

    def matches(self, model: nn.Module) -> bool:
        """Whether ``model`` has what this adapter rewrites (it declines every model for now)."""
        return False

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        """Rewrite ``model`` through ``edit`` only."""
        raise NotImplementedError("{name}: apply() is not written yet")


adapter = {cls}()
'''

_TEST = '''\
"""The ``{name}`` adapter: the adapted model computes what the stock model computes (CPU), and
runs and matches the CPU on the emulated device at stack {release}.

Each test skips while the adapter declines the family (``matches()`` is false, as in the
generated implementation), so nothing here passes without checking something. The device test
needs this package installed (``pip install -e .``): it applies the adapters the installed
plugins resolve, as ``pytest --spyre`` does.
"""

from __future__ import annotations

import copy

import pytest
import torch

from spyre_adapters import default_registry
from spyre_adapters.contract import ModelEdit
from spyre_adapters.enablement.families import BuiltFamily, build_family
from spyre_adapters.enablement.triage import triage
from {package}.adapter import adapter

#: The model types (Transformers ``model_type``) the adapter is for; once these tests pass for
#: one, list it in the manifest's ``families``.
FAMILIES: list[str] = {families_q}
#: The release the device test runs at.
RELEASE = {release_q}


def _built(model_type: str) -> BuiltFamily:
    built = build_family(model_type)
    if not adapter.matches(built.model):
        pytest.skip(
            f"{name} does not match {{model_type}} yet: write matches() and apply() in "
            "src/{package}/adapter.py"
        )
    return built


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_output_as_the_stock_model_on_the_cpu(model_type: str) -> None:
    built = _built(model_type)
    model = copy.deepcopy(built.model)
    edit = ModelEdit(model)
    adapter.apply(model, edit)
    assert edit.touched, "apply() matched the model but changed nothing"
    torch.testing.assert_close(built.run(model), built.reference)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_runs_and_matches_the_cpu_on_the_device(model_type: str) -> None:
    built = _built(model_type)
    assert "{name}" in default_registry(), "install this package first: pip install -e ."
    result = triage(built, RELEASE)
    assert result.category.enabled, result.detail
'''

_README = """\
# {distribution}

A third-party adapter for spyre-adapters: `{name}` bridges {gaps} (from stack {release}).
Generated by `spyre-adapters new`; until `matches()` and `apply()` are written in
`src/{package}/adapter.py` the adapter declines every model, so installing it changes nothing.

1. Write `matches()` and `apply()` in `src/{package}/adapter.py`.
2. Install and check that it registers: `pip install -e .` then `spyre-adapters list`.
3. Put the model types it is for in `FAMILIES` of `tests/test_{package}.py` and run
   `pytest tests/`: the adapted model must compute what the stock model does on the CPU,
   and run and match the CPU on the emulated device.
4. List the families it was verified on in `src/{package}/manifests/{name}/0.1.0.toml`, and
   see the gaps it bridges close: `spyre-adapters show {name}`.
"""


def package_files(spec: AdapterPackage, manifest: str) -> dict[str, str]:
    """The files of the package (relative path -> text), with ``manifest`` as its manifest
    (the caller validates it: :func:`manifest_skeleton` with ``entry_point=spec.entry_point``).
    """
    gaps = ", ".join(f"`{g}`" for g in spec.gaps)
    fields: Mapping[str, Any] = {
        "name": spec.name,
        "package": spec.package,
        "distribution": spec.distribution,
        "cls": spec.class_name,
        "gaps": gaps,
        "release": spec.release,
        # Python literals (JSON's string and list syntax is valid Python)
        "package_q": json.dumps(spec.package),
        "families_q": json.dumps(list(spec.families)),
        "release_q": json.dumps(spec.release),
    }
    summary = spec.summary or f"The {spec.name} adapter for spyre-adapters."
    source = f"src/{spec.package}"
    return {
        "pyproject.toml": _pyproject(spec, summary),
        "README.md": _README.format(**fields),
        f"{source}/__init__.py": f'"""The {spec.name} adapter for spyre-adapters."""\n',
        f"{source}/plugin.py": _PLUGIN.format(**fields),
        f"{source}/adapter.py": _ADAPTER.format(**fields),
        f"{source}/manifests/{spec.name}/0.1.0.toml": manifest,
        f"tests/test_{spec.package}.py": _TEST.format(**fields),
    }
