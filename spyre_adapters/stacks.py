"""The view of the stack catalogue that :mod:`spyre_adapters` relies on.

The catalogue itself lives in :mod:`spyre_sim.catalogue`; this module names the few members the
adapter layer reads (as ``Protocol`` types, so tests and tools can pass a small catalogue of
their own) and turns a user's ``stack`` argument into a release of a given catalogue.

Only ``Release.gap_open`` and ``Gap.nature.value`` are read, never ``GapState`` members: a gap is
closed for the lifecycle exactly when ``gap_open`` is false. A release is looked up by the
catalogue itself (``Catalogue.release``, which also accepts ``"2026.5"`` for ``"2026.05"``).
:mod:`spyre_sim` is imported on first use (it imports torch), never at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from packaging.version import Version

from spyre_adapters.errors import UnknownReleaseError

__all__ = [
    "CatalogueLike",
    "GapLike",
    "ReleaseLike",
    "default_catalogue",
    "is_lasting",
    "release_diff",
    "release_of",
]

#: What a caller may pass as ``stack``: a release name, a release TOML file, a release object.


class _NatureLike(Protocol):
    @property
    def value(self) -> str: ...


class GapLike(Protocol):
    """A gap of the catalogue (``spyre_sim.catalogue.Gap``)."""

    @property
    def id(self) -> str: ...

    @property
    def nature(self) -> _NatureLike: ...


class ReleaseLike(Protocol):
    """A stack release (``spyre_sim.catalogue.Release``)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> Version: ...

    def gap_open(self, gap_id: str) -> bool: ...


class CatalogueLike(Protocol):
    """The stack catalogue (``spyre_sim.catalogue.Catalogue``)."""

    @property
    def releases(self) -> Sequence[ReleaseLike]: ...

    def release(self, name: str) -> ReleaseLike:
        """The release called ``name``; raises :class:`UnknownReleaseError` if none is."""
        ...

    @property
    def gaps(self) -> Mapping[str, GapLike]: ...


def default_catalogue() -> CatalogueLike:
    """The built-in catalogue of :mod:`spyre_sim` (imported on first use, not at import)."""
    from spyre_sim.catalogue import builtin_catalogue

    return cast(CatalogueLike, builtin_catalogue())


def is_lasting(catalogue: CatalogueLike, gap_id: str) -> bool:
    """Whether ``gap_id`` is a lasting hardware property (never closed by any release)."""
    gap = catalogue.gaps.get(gap_id)
    return gap is not None and gap.nature.value == "lasting"


def release_of(
    stack: str | os.PathLike[str] | ReleaseLike | None, catalogue: CatalogueLike
) -> ReleaseLike:
    """Turn ``stack`` into a release.

    ``None`` means the active release of :mod:`spyre_sim` (``spyre_sim.stack.current_stack()``)
    when that module is available, else the newest release of ``catalogue``. A name is looked
    up in ``catalogue``; a path (or a name ending in ``.toml``) is a user release file, resolved
    by ``spyre_sim.catalogue.resolve_stack``; an upstream version string (``0.0.1+g<sha>``,
    ``release-2026-09-22``) becomes the release of ``catalogue`` that covers its date
    (``spyre_sim.catalogue.resolve_upstream``; a warning says which). A release object is
    returned as is.
    """
    if stack is None:
        try:
            from spyre_sim.stack import current_stack
        except ImportError:
            return catalogue.releases[-1]
        return cast(ReleaseLike, current_stack())
    if not isinstance(stack, (str, os.PathLike)):
        return stack
    text = os.fspath(stack)
    try:  # the catalogue's one lookup ("2026.5" names the same release as "2026.05")
        return catalogue.release(text)
    except UnknownReleaseError:
        pass
    if isinstance(stack, os.PathLike) or text.endswith(".toml") or Path(text).is_file():
        from spyre_sim.catalogue import resolve_stack

        return cast(ReleaseLike, resolve_stack(text))
    upstream = _upstream_release(text, catalogue)
    if upstream is not None:
        return upstream
    raise UnknownReleaseError(text, [r.name for r in catalogue.releases])


def _upstream_release(text: str, catalogue: CatalogueLike) -> ReleaseLike | None:
    """The release of ``catalogue`` an upstream version string resolves to, if it is one."""
    try:
        from spyre_sim.catalogue import resolve_stack, resolve_upstream
    except ImportError:
        return None
    if resolve_upstream(text) is None:
        return None
    resolved = resolve_stack(text)  # warns once, naming the release
    for release in catalogue.releases:
        if release.name == resolved.name:
            return release
    return None


def release_diff(catalogue: CatalogueLike, old: str, new: str) -> Any:
    """What changes from release ``old`` to the newer ``new``: the catalogue's own diff
    (``spyre_sim.catalogue.Catalogue.diff``, a ``CatalogueDiff`` with gap, op and miscompile
    changes, each naming the release that set it and its evidence)."""
    diff = getattr(catalogue, "diff", None)
    if diff is None:
        raise UnknownReleaseError(
            f"{old}..{new}", [r.name for r in catalogue.releases]
        )  # a catalogue without rules cannot be compared
    return diff(old, new)
