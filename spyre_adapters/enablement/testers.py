"""Families built the way Transformers' own model tests build them: from a test tree's testers.

A Transformers test tree (``tests/models/<family>/test_modeling_<family>.py``) holds, per model
family, a test class whose ``setUp`` makes a *model tester*; the tester's
``prepare_config_and_inputs_for_common()`` returns a tiny config that the family is known to
build from, and inputs its forward accepts (token ids, pixels, audio, boxes, time series...).
That is a better denominator than the generic inputs of :mod:`spyre_adapters.enablement.families`, which
cannot feed many audio, multimodal, detection and time-series families.

:func:`testers_in_file` imports one test file from the tree (``tests`` must be importable as the
tree's own package: the tree's folder goes first on ``sys.path``) and returns, per test class
with a model tester, the model type and a way to build it; :func:`build_from_tester` builds a
:class:`~spyre_adapters.enablement.families.BuiltFamily` from it: the tester's config, at the tester's
own tiny sizes or **scaled** (every width, FFN size, head count and head size set to the
realistic preset's, the tester's depth, vocabulary, input lengths and inputs kept), the model
class the sweep compares (the causal LM where the tester has one, else the base model), the
tester's inputs, and the CPU reference output (the criteria of :mod:`spyre_adapters.enablement.families`).
A family that does not build scaled is built at the tester's own sizes (its ``fit`` says so).

Which file holds a model type's tester is found by :func:`find_tester_files`: the folder named
after the model type first, then the files that name the type's config class.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import os
import random
import sys
import unittest
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from spyre_adapters.enablement.families import (
    BuiltFamily,
    compared_output_name,
    judge_reference,
    unrun,
)
from spyre_adapters.enablement.family_configs import scale_widths
from spyre_adapters.enablement.size_presets import REALISTIC, TINY, FamilyBuildError
from spyre_adapters.main_output import output_named

__all__ = [
    "TESTER",
    "TESTER_SCALED",
    "TesterEntry",
    "build_from_tester",
    "find_tester_files",
    "model_test_classes",
    "offline",
    "seed_testers",
    "test_files",
    "testers_in_file",
]

#: The presets of tester-built families (their sizes are the tester's own; ``TESTER_SCALED``
#: has the realistic preset's widths).
TESTER = replace(TINY, name="tester")
TESTER_SCALED = replace(REALISTIC, name="tester-scaled")


@dataclass(frozen=True)
class TesterEntry:
    """One model tester of a test file: ``model_type`` of its config, the test class, and
    ``make()`` -> ``(config, inputs, model classes)`` (a fresh call each time)."""

    model_type: str
    file: str
    test_class: str
    make: Callable[[], tuple[Any, dict[str, Any], tuple[type, ...]]]


def test_files(tree: Path) -> list[str]:
    """Every ``tests/models/*/test_modeling_*.py`` of ``tree``, relative and sorted."""
    models = tree / "tests" / "models"
    return sorted(str(p.relative_to(tree)) for p in models.glob("*/test_modeling_*.py"))


def prepared_tree(tree: Path) -> Path:
    """``tree`` itself when it has ``src/transformers`` (some test modules read the library's
    sources from there at import), else a folder in the user cache holding links to the
    tree's ``tests`` and ``utils`` and to the installed Transformers as ``src/transformers``
    (the tree itself is never written to)."""
    tree = tree.resolve()
    if (tree / "src" / "transformers" / "__init__.py").is_file():
        return tree
    import hashlib

    import transformers

    from spyre_adapters._user_cache import cache_root

    key = hashlib.sha256(f"{tree}:{transformers.__file__}".encode()).hexdigest()[:16]
    root = cache_root() / f"testers-{key}"
    links = {
        root / "tests": tree / "tests",
        root / "utils": tree / "utils",
        root / "src" / "transformers": Path(transformers.__file__).resolve().parent,
    }
    for link, target in links.items():
        if link.is_symlink() and link.resolve() == target:
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return root


def offline() -> None:
    """Keep the Hugging Face Hub offline in this process (``HF_HUB_OFFLINE``, unless the
    environment says otherwise). Some testers load a config from the Hub (a timm backbone's):
    a sweep must not download, and online it would wait through every retry of an unreachable
    Hub; offline the build fails at once and the type is listed with that reason."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None and os.environ["HF_HUB_OFFLINE"].upper() in {"1", "ON", "YES", "TRUE"}:
        hub.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]


def _import(tree: Path, relative: str) -> Any:
    """Import a test file of ``tree`` as the tree's ``tests`` package imports it (offline)."""
    offline()
    root = str(prepared_tree(tree))
    own = str((Path(root) / "tests").resolve())
    loaded = sys.modules.get("tests")
    # a namespace package `tests` found on an earlier path (a project's own test folder) of
    # which nothing is loaded yet: the tree's regular package may take its place
    if (
        loaded is not None
        and getattr(loaded, "__file__", None) is None
        and not any(name.startswith("tests.") for name in sys.modules)
    ):
        del sys.modules["tests"]
        loaded = None
    if loaded is not None:
        where = [str(Path(p).resolve()) for p in getattr(loaded, "__path__", [])]
        if own not in where:
            raise FamilyBuildError(
                relative,
                "config",
                f"another package named 'tests' is already imported ({where}); run from a "
                "process that has not imported one",
            )
    if sys.path[:1] != [root]:
        sys.path.insert(0, root)
    importlib.invalidate_caches()
    module = relative.removesuffix(".py").replace("/", ".")
    return importlib.import_module(module)


def model_test_classes(module: Any) -> Iterator[type[unittest.TestCase]]:
    """The test classes ``module`` defines that test models: a ``unittest.TestCase`` with
    ``all_model_classes`` or a ``model_tester_class``."""
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, unittest.TestCase)
            and value.__module__ == module.__name__
            and (
                getattr(value, "all_model_classes", None)
                or getattr(value, "model_tester_class", None)
            )
        ):
            yield value


def _make(test_class: type[unittest.TestCase]) -> tuple[Any, dict[str, Any], tuple[type, ...]]:
    method = next((n for n in dir(test_class) if n.startswith("test_")), "run")
    case = test_class(method)
    case.setUp()
    tester = getattr(case, "model_tester", None)
    if tester is None or not hasattr(tester, "prepare_config_and_inputs_for_common"):
        raise LookupError(f"{test_class.__name__}.setUp() makes no model tester")
    config, inputs = tester.prepare_config_and_inputs_for_common()
    listed: Any = getattr(case, "all_model_classes", None) or getattr(
        tester, "all_model_classes", None
    )
    classes = tuple(c for c in listed or () if isinstance(c, type))
    return config, dict(inputs), classes


def testers_in_file(tree: Path, relative: str) -> list[TesterEntry]:
    """The model testers of one test file (see the module docstring); a test class whose
    tester cannot be made is left out (its error is raised by :func:`build_from_tester`)."""
    module = _import(tree, relative)
    entries = []
    for test_class in model_test_classes(module):
        try:
            config, _inputs, _classes = _make(test_class)
        except Exception:
            continue
        model_type = getattr(config, "model_type", None)
        if not isinstance(model_type, str) or not model_type:
            continue
        entries.append(
            TesterEntry(
                model_type, relative, test_class.__name__, functools.partial(_make, test_class)
            )
        )
    return entries


def find_tester_files(model_type: str, tree: Path) -> list[str]:
    """Test files that may hold ``model_type``'s tester, most likely first: the folder named
    after it, then files naming its config class."""
    from transformers import CONFIG_MAPPING

    files = test_files(tree)
    folder = model_type.replace("-", "_")
    first = [f for f in files if f.split("/")[2] == folder]
    try:
        config_name = CONFIG_MAPPING[model_type].__name__
    except KeyError:
        return first
    named = []
    for relative in files:
        if relative in first:
            continue
        try:
            text = (tree / relative).read_text("utf-8")
        except OSError:
            continue
        if config_name in text:
            named.append(relative)
    return first + named


def _model_class(config: Any, classes: tuple[type, ...]) -> tuple[type, str]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_MAPPING,
    )

    mappings: tuple[tuple[Any, str], ...] = (
        (MODEL_FOR_CAUSAL_LM_MAPPING, "causal-lm"),
        (MODEL_MAPPING, "base"),
    )
    for mapping, kind in mappings:
        try:
            wanted: type = mapping[type(config)]
        except (KeyError, ValueError, ImportError):
            continue
        if wanted in classes:
            return wanted, kind
    if not classes:
        raise LookupError("the test class lists no model class")
    return classes[0], "base"


def _split(inputs: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    options = {k: v for k, v in inputs.items() if not isinstance(v, torch.Tensor)}
    return tensors, options


def build_entry(entry: TesterEntry, *, scaled: bool, seed: int = 0) -> BuiltFamily:
    """Build one tester's family (see the module docstring); :class:`FamilyBuildError` names
    the stage that failed.

    ``scaled``: when the family does not build, run or give a reference with the realistic
    widths (its config derives shapes the scaling does not know about), it is built again at
    the tester's own sizes, and ``fit`` says so (``tester-sizes:<file>::<class>``); the error
    of the scaled build is raised when that fails too."""
    try:
        return _build_entry(entry, scaled=scaled, seed=seed)
    except FamilyBuildError as first:
        if not scaled or (first.stage == "config" and "the tester fails" in str(first)):
            raise
        try:
            built = _build_entry(entry, scaled=False, seed=seed)
        except FamilyBuildError:
            raise first from None
        return replace(built, fit=f"tester-sizes:{entry.file}::{entry.test_class}")


def seed_testers(seed: int) -> None:
    """Seed what a test tree's testers draw their inputs from: Python's and torch's global
    generators, and every ``random.Random`` a module of the tree's ``tests`` package holds
    (Transformers' ``ids_tensor`` and ``floats_tensor`` draw from an unseeded module-level
    ``global_rng``), so that two builds of a tester give the same inputs and a sweep over the
    tree is reproducible."""
    random.seed(seed)
    torch.manual_seed(seed)
    for name, module in list(sys.modules.items()):
        if name != "tests" and not name.startswith("tests."):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, random.Random):
                value.seed(seed)


def _build_entry(entry: TesterEntry, *, scaled: bool, seed: int) -> BuiltFamily:
    model_type = entry.model_type
    try:
        seed_testers(seed)
        config, inputs, classes = entry.make()
    except Exception as exc:
        raise FamilyBuildError(model_type, "config", f"the tester fails: {_one_line(exc)}") from exc
    if scaled:
        try:
            config = scale_widths(config, REALISTIC)
        except Exception as exc:
            raise FamilyBuildError(model_type, "config", _one_line(exc)) from exc
    try:
        model_class, kind = _model_class(config, classes)
        torch.manual_seed(seed)
        model = model_class(copy.deepcopy(config)).eval()
    except Exception as exc:
        raise FamilyBuildError(model_type, "instantiate", _one_line(exc)) from exc
    tensors, options = _split(inputs)
    parameters = inspect.signature(model.forward).parameters
    if "use_cache" in parameters and "use_cache" not in options:
        options["use_cache"] = False
    tensors = {k: v for k, v in tensors.items() if k in parameters or _takes_kwargs(parameters)}
    try:
        with torch.no_grad():
            out = unrun(model)(**tensors, **options)
        output_name = compared_output_name(out, kind)
        reference = output_named(out, output_name)
    except Exception as exc:
        raise FamilyBuildError(model_type, "forward", _one_line(exc)) from exc
    if not reference.is_floating_point():
        raise FamilyBuildError(
            model_type, "forward", f"the compared output {output_name!r} is not floating point"
        )
    why = judge_reference(reference, output_name)
    if why is not None:
        raise FamilyBuildError(model_type, "reference", why)
    return BuiltFamily(
        model_type=model_type,
        preset=TESTER_SCALED if scaled else TESTER,
        config=config,
        model=model,
        inputs=tensors,
        kind=kind if output_name == "logits" else "base",
        output_name=output_name,
        reference=reference.detach().float(),
        options=options,
        fit=f"tester:{entry.file}::{entry.test_class}",
    )


def _takes_kwargs(parameters: Any) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def build_from_tester(model_type: str, tree: Path, *, scaled: bool = True) -> BuiltFamily:
    """Build ``model_type`` from its tester in the test tree ``tree`` (see the module
    docstring). Raises :class:`FamilyBuildError` when no tester builds it."""
    errors = []
    for relative in find_tester_files(model_type, tree):
        try:
            entries = testers_in_file(tree, relative)
        except FamilyBuildError:
            raise
        except Exception as exc:
            errors.append(f"{relative}: {_one_line(exc)}")
            continue
        for entry in entries:
            if entry.model_type == model_type:
                return build_entry(entry, scaled=scaled)
    found = "; ".join(errors) if errors else "no test file of the tree has a tester for it"
    raise FamilyBuildError(model_type, "config", f"no model tester builds it ({found})")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
