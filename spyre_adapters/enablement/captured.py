"""Bridge samples captured by a test suite, and the generated bridges planned from them.

The bridge loop (:mod:`spyre_adapters.enablement.bridge`) meets the ops a family's plain forward
reaches with generic inputs. A test suite reaches more: a forward with ``labels`` computes a
loss (``aten.nll_loss_forward``), generation asks which tokens finished (``aten.nonzero``), a
tokenizer-free test deduplicates ids (``aten.unique_consecutive``). ``pytest --spyre
--spyre-capture-bridges DIR`` (:mod:`pytest_spyre.capture_bridges`) records, for every op a
test meets inside the model scope that the release refuses, the op's real arguments as bridge
samples (:class:`~spyre_adapters.enablement.op_validation.Sample`), a few distinct signatures
per op, and where they were met (test id, module path, model type).

**The capture file.** Each pytest process writes one file, ``capture-<release>-<stamp>.pt``
(``torch.save`` of a dict, ``schema_version`` 1), with a readable summary beside it
(``.json``: the ops, their gaps, signatures, tests and model types); both are written
atomically at the end of the session, so a folder may gather the captures of many runs
(families, releases, xdist workers) and :func:`load_captures` merges them:

.. code-block:: python

    {"schema_version": 1, "release": "2026.09",
     "ops": {"aten.nll_loss_forward.default": {
         "gap": "loss", "samples": [Sample, ...], "tests": ["tests/...::test_x", ...],
         "families": ["llama"]}}}

**Planning.** :func:`plan_captured` turns the merged captures into generated adapter versions
(:class:`~spyre_adapters.enablement.generation.GeneratedBridge`): per op, the candidates are
validated on the captured samples and their variants of other shapes and dtypes at every
release of the catalogue where a captured sample is refused
(:func:`~spyre_adapters.enablement.generation.plan_versions`), and the versions list as verified
the model types whose captured arguments they hold on. An op that returns a view of its input,
or a transfer, is never bridged (another form would be a copy, or would land elsewhere); an
op already bridged by a released generated adapter gets its new versions numbered after the
released ones.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spyre_adapters.enablement.generation import released_versions
from spyre_adapters.errors import SpyreAdaptersError

if TYPE_CHECKING:
    from spyre_adapters.enablement.generation import GeneratedBridge
    from spyre_adapters.enablement.op_samples import Sample
    from spyre_adapters.stacks import CatalogueLike
    from spyre_sim.catalogue import Release

__all__ = [
    "MAX_SIGNATURES",
    "SCHEMA_VERSION",
    "CaptureFileError",
    "CapturedOp",
    "Planned",
    "capture_label",
    "load_captures",
    "plan_captured",
    "read_sample_file",
    "next_version",
    "released_versions",
    "write_capture",
    "write_sample_file",
]

SCHEMA_VERSION = 1
#: At most this many distinct signatures are kept per op (per process, and per op planned).
MAX_SIGNATURES = 4
#: At most this many test ids are kept per op, as evidence of where it was met.
MAX_TESTS = 20
_PREFIX = "capture-"


def capture_label(test: str, module_path: str | None) -> str:
    """The label of a sample captured in a test: ``captured by pytest in <test id>
    (<module path>)``; the generated manifest lists it as evidence."""
    return f"captured by pytest in {test} ({module_path or 'the model'})"


@dataclass(frozen=True)
class CapturedOp:
    """What the captures hold for one op: its gap, samples (distinct signatures first met),
    the tests that met it, the model types and the releases it was refused at."""

    op: str
    gap: str
    samples: tuple[Sample, ...]
    tests: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "gap": self.gap,
            "releases": list(self.releases),
            "families": list(self.families),
            "tests": list(self.tests),
            "samples": [f"{s.signature} ({s.label})" for s in self.samples],
        }


class CaptureFileError(SpyreAdaptersError):
    """A capture file that cannot be read: ``path`` and ``reason`` (with the remedy)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot read capture file {path}: {reason}")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_capture(
    directory: Path, release: str, ops: Mapping[str, CapturedOp], *, tag: str = ""
) -> Path:
    """Write the captures of one process into ``directory`` (created if missing): the ``.pt``
    file :func:`load_captures` reads, and its ``.json`` summary. Each is written to a
    temporary file and renamed, so a reader never sees half a file. Returns the ``.pt`` path."""
    import torch

    from spyre_adapters._outputs import write_text

    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    name = f"{_PREFIX}{release}-{stamp}-{os.getpid()}{'-' + tag if tag else ''}"
    body = {
        "schema_version": SCHEMA_VERSION,
        "release": release,
        "ops": {
            op: {
                "gap": c.gap,
                "samples": list(c.samples),
                "tests": list(c.tests),
                "families": list(c.families),
            }
            for op, c in sorted(ops.items())
        },
    }
    buffer = io.BytesIO()
    torch.save(body, buffer)
    target = directory / f"{name}.pt"
    _atomic_bytes(target, buffer.getvalue())
    summary = {
        "schema_version": SCHEMA_VERSION,
        "release": release,
        "ops": {op: c.to_json() for op, c in sorted(ops.items())},
    }
    write_text(directory / f"{name}.json", json.dumps(summary, indent=1) + "\n")
    return target


def _read(path: Path) -> dict[str, Any]:
    import torch

    try:
        body = torch.load(path, weights_only=False)
    except Exception as exc:
        raise CaptureFileError(
            path, f"not a capture file ({type(exc).__name__}: {exc}); remove it or capture again"
        ) from exc
    if not isinstance(body, dict) or body.get("schema_version") != SCHEMA_VERSION:
        found = body.get("schema_version") if isinstance(body, dict) else type(body).__name__
        raise CaptureFileError(
            path,
            f"schema_version {found!r}, this version reads {SCHEMA_VERSION}; capture again "
            "with this version of pytest --spyre --spyre-capture-bridges",
        )
    return body


def load_captures(directories: Sequence[Path]) -> dict[str, CapturedOp]:
    """Merge every ``capture-*.pt`` file of ``directories`` (see the module docstring): per op,
    the samples of distinct signatures in the order met (files sorted by name), the tests,
    model types and releases. A folder without capture files is an error (a typo must not
    plan nothing silently)."""
    from spyre_adapters.enablement.op_samples import Sample

    merged: dict[str, dict[str, Any]] = {}
    for directory in directories:
        files = sorted(Path(directory).glob(f"{_PREFIX}*.pt"))
        if not files:
            raise CaptureFileError(
                Path(directory),
                "no capture-*.pt file in it; write some with pytest --spyre "
                "--spyre-capture-bridges DIR",
            )
        for path in files:
            body = _read(path)
            release = str(body.get("release", ""))
            for op, entry in body.get("ops", {}).items():
                into = merged.setdefault(
                    op,
                    {"gap": entry["gap"], "samples": {}, "tests": [], "fams": [], "rel": []},
                )
                for sample in entry["samples"]:
                    if not isinstance(sample, Sample):
                        raise CaptureFileError(path, f"{op}: a sample is a {type(sample)}")
                    into["samples"].setdefault(sample.signature, sample)
                for key, values in (
                    ("tests", entry.get("tests", [])),
                    ("fams", entry.get("families", [])),
                    ("rel", [release]),
                ):
                    into[key].extend(v for v in values if v and v not in into[key])
    return {
        op: CapturedOp(
            op,
            entry["gap"],
            tuple(entry["samples"].values()),
            tuple(entry["tests"][:MAX_TESTS]),
            tuple(sorted(entry["fams"])),
            tuple(sorted(entry["rel"])),
        )
        for op, entry in sorted(merged.items())
    }


def write_sample_file(path: Path, op: str, samples: Sequence[Sample]) -> None:
    """Keep the samples a generated version was validated on, for its tests: plain tensors and
    values (``torch.load(..., weights_only=True)`` reads them), written atomically."""
    import torch

    body = {
        "schema_version": SCHEMA_VERSION,
        "op": op,
        "samples": [
            {"label": s.label, "args": list(s.args), "kwargs": dict(s.kwargs)} for s in samples
        ],
    }
    buffer = io.BytesIO()
    torch.save(body, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_bytes(path, buffer.getvalue())


def read_sample_file(path: Path) -> tuple[str, list[Sample]]:
    """The op and the captured samples :func:`write_sample_file` kept."""
    import torch

    from spyre_adapters.enablement.op_samples import Sample

    body = torch.load(path, weights_only=True)
    if not isinstance(body, dict) or body.get("schema_version") != SCHEMA_VERSION:
        raise CaptureFileError(path, f"not a sample file of schema_version {SCHEMA_VERSION}")
    samples = [
        Sample(s["label"], tuple(s["args"]), dict(s["kwargs"]), captured=True)
        for s in body["samples"]
    ]
    return str(body["op"]), samples


@dataclass(frozen=True)
class Planned:
    """The outcome of :func:`plan_captured` for one op: the versions to write, and lines
    saying what was not bridged where, and why."""

    op: str
    versions: tuple[GeneratedBridge, ...]
    notes: tuple[str, ...] = field(default=())
    samples: tuple[Sample, ...] = field(default=(), compare=False, repr=False)


def _not_bridgeable(op: str) -> str | None:
    """Why ``op`` is never bridged (a view, a transfer, no such op), or ``None``."""
    from spyre_adapters.library.op_bridge import resolve_op

    try:
        overload = resolve_op(op)
    except ValueError as exc:
        return str(exc)
    schema = overload._schema
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    if any(r.alias_info is not None for r in schema.returns) and not writes:
        return (
            f"{op} returns a view of its input: computed in another form it would be a copy, "
            "and writes through the view would be lost"
        )
    if op.split(".")[1] in ("_to_copy", "to", "_copy_from", "copy_", "_copy_from_and_resize"):
        return f"{op} moves or copies a tensor: a transfer is never bridged"
    return None


def next_version(released: Collection[tuple[str, str]], name: str) -> str:
    """``1.0.0`` for an adapter without a released version; else the minor after the newest
    released one (an unreleased version is rewritten in place, so planning twice is stable)."""
    from packaging.version import Version

    versions = [Version(v) for n, v in released if n == name]
    if not versions:
        return "1.0.0"
    newest = max(versions)
    return f"{newest.major}.{newest.minor + 1}.0"


def plan_captured(
    captures: Mapping[str, CapturedOp],
    releases: Sequence[Release],
    catalogue: CatalogueLike,
    *,
    released: Collection[tuple[str, str]] = (),
    layout_checks: bool = True,
) -> list[Planned]:
    """The generated versions for the captured ops (see the module docstring). ``releases``:
    where to validate (oldest first; every release of the catalogue, normally); ``released``:
    the versions recorded as released (new versions of an op's adapter come after them)."""
    from spyre_adapters.enablement.generation import (
        NOT_NEEDED,
        adapter_name,
        plan_versions,
        versions_of,
    )
    from spyre_adapters.stacks import is_lasting

    out = []
    for op, captured in sorted(captures.items()):
        why = _not_bridgeable(op)
        if why is not None:
            out.append(Planned(op, (), (f"not bridged: {why}",)))
            continue
        samples = list(captured.samples[:MAX_SIGNATURES])
        plans, failed = plan_versions(op, samples, releases, layout_checks=layout_checks)
        notes = [
            f"no candidate at {release}: {reason[:300]}"
            for release, reason in failed.items()
            if reason != NOT_NEEDED
        ]
        if not plans:
            notes.append("no release refuses the captured calls and has a candidate that holds")
            out.append(Planned(op, (), tuple(notes)))
            continue
        families = {r: list(captured.families) for plan in plans for r in plan.releases}
        versions = versions_of(
            op,
            captured.gap,
            is_lasting(catalogue, captured.gap),
            plans,
            families,
            catalogue,
            failed=failed,
            first_version=next_version(released, adapter_name(op)),
        )
        out.append(Planned(op, tuple(versions), tuple(notes), tuple(samples)))
    return out
