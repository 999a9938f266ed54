"""The active stack release of the emulated device.

The active release is **process-wide** (one module-level value shared by every thread), like
the stack installed on a real machine. Select it explicitly::

    spyre_sim.use_stack("2026.05")               # plain call: stays active
    with spyre_sim.use_stack("my/2026.11.toml"):  # context manager: restored on exit
        ...

The default is the newest built-in release, chosen lazily on first use; nothing is read from
the environment. Contexts nest; each restores the release that was active when it was created.

For hot paths, :func:`current_stack` is a global read plus a ``None`` check, and
:func:`stack_generation` is an ``int`` that changes every time the active release changes, so a
cache of decisions can be keyed on it (or dropped when it differs from the cached value).
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

from spyre_sim.catalogue import Release, builtin_catalogue, resolve_stack

__all__ = ["current_stack", "stack_generation", "use_stack"]

_lock = threading.Lock()
_current: Release | None = None
_generation = 0


def current_stack() -> Release:
    """The active release (the newest built-in one unless :func:`use_stack` chose another)."""
    release = _current
    if release is None:
        release = _activate_default()
    return release


def stack_generation() -> int:
    """A counter that increments whenever the active release changes (starts at 0)."""
    return _generation


def use_stack(spec: str | os.PathLike[str] | Release) -> _StackContext:
    """Make ``spec`` the active release now and return a context manager that restores the
    previous one on exit.

    ``spec`` is a built-in release name (``"2026.05"``), the path of a user release TOML file
    that extends a built-in one, or a :class:`~spyre_sim.catalogue.Release`. An unknown name
    raises :class:`~spyre_sim.errors.SpyreSimError` listing the valid names; a bad file raises
    :class:`~spyre_sim.errors.CatalogueError` listing every problem. On error the active
    release does not change.
    """
    release = resolve_stack(spec)
    previous = _swap(release)
    return _StackContext(release, previous)


class _StackContext:
    """Returned by :func:`use_stack`; ``with`` restores the release active before the call."""

    __slots__ = ("_previous", "release")

    def __init__(self, release: Release, previous: Release | None) -> None:
        self.release = release
        self._previous = previous

    def __repr__(self) -> str:
        return f"use_stack({self.release.name!r})"

    def __enter__(self) -> Release:
        return self.release

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _swap(self._previous)


def _swap(release: Release | None) -> Release | None:
    """Install ``release`` (``None``: back to the lazy default); return the one it replaces."""
    global _current, _generation
    with _lock:
        previous = _current
        if release is not previous:
            _current = release
            _generation += 1
        return previous


def _activate_default() -> Release:
    global _current, _generation
    newest = builtin_catalogue().newest
    with _lock:
        if _current is None:
            _current = newest
            _generation += 1
        return _current
