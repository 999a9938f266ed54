"""The active stack release of the emulated device.

The active release is **process-wide** (one value of :data:`spyre_sim.state.device_state`, shared by every thread), like
the stack installed on a real machine. Select it explicitly::

    spyre_sim.use_stack("2026.05")               # plain call: stays active
    with spyre_sim.use_stack("my/2026.11.toml"):  # context manager: restored on exit
        ...
    ctx = spyre_sim.use_stack("release-2026-09-22")  # an upstream version string
    ctx.resolution.release.name, ctx.resolution.exact  # ("2026.09", True)

An upstream version string -- ``torch_spyre.__version__`` of a build (``0.0.1+g8068434``, a
commit the catalogue lists) or a dated CI image tag (``release-2026-09-22``,
``nightly-2026-10-09``) -- resolves to the release whose upstream range covers its date; a
:class:`~spyre_sim.errors.SpyreStackResolutionWarning` says which (once per string), and the
returned context's ``resolution`` (:class:`~spyre_sim.catalogue.StackResolution`) says it
too: ``exact`` is false for a date after every modelled state.

The default is the newest built-in release, chosen lazily on first use; nothing is read from
the environment. Contexts nest; each restores the release that was active when it was created.

For hot paths, :func:`current_stack` is a global read plus a ``None`` check, and
:func:`stack_generation` is an ``int`` that changes every time the active release changes, so a
cache of decisions can be keyed on it (or dropped when it differs from the cached value).
"""

from __future__ import annotations

import os
from types import TracebackType

from spyre_sim.catalogue import (
    Release,
    StackResolution,
    builtin_catalogue,
    resolve_stack,
    resolve_upstream,
)
from spyre_sim.state import device_state

__all__ = ["current_stack", "stack_generation", "use_stack"]

_state = device_state  # the active release and its generation live in the device state


def current_stack() -> Release:
    """The active release (the newest built-in one unless :func:`use_stack` chose another)."""
    release = _state.release
    if release is None:
        release = _activate_default()
    return release


def stack_generation() -> int:
    """A counter that increments whenever the active release changes (starts at 0)."""
    return _state.stack_generation


def use_stack(spec: str | os.PathLike[str] | Release) -> _StackContext:
    """Make ``spec`` the active release now and return a context manager that restores the
    previous one on exit.

    ``spec`` is a built-in release name (``"2026.05"``), an upstream version string
    (``"0.0.1+g8068434"``, ``"release-2026-09-22"``: resolved to the release covering its
    date, see the module docstring), the path of a user release TOML file that extends a
    built-in one, or a :class:`~spyre_sim.catalogue.Release`. An unknown name raises
    :class:`~spyre_sim.errors.SpyreSimError` listing the valid names; a bad file raises
    :class:`~spyre_sim.errors.CatalogueError` listing every problem. On error the active
    release does not change.
    """
    release = resolve_stack(spec)
    resolution = None
    if isinstance(spec, str) and spec not in builtin_catalogue() and not os.path.isfile(spec):
        resolution = resolve_upstream(spec)
    previous = _swap(release)
    return _StackContext(release, previous, resolution)


class _StackContext:
    """Returned by :func:`use_stack`; ``with`` restores the release active before the call."""

    __slots__ = ("_previous", "release", "resolution")

    def __init__(
        self,
        release: Release,
        previous: Release | None,
        resolution: StackResolution | None = None,
    ) -> None:
        self.release = release
        #: how an upstream version string became ``release`` (``None`` for a name or a file)
        self.resolution = resolution
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
    with _state.stack_lock:
        previous = _state.release
        if release is not previous:
            _state.release = release
            _state.stack_generation += 1
        return previous


def _activate_default() -> Release:
    newest = builtin_catalogue().newest
    with _state.stack_lock:
        if _state.release is None:
            _state.release = newest
            _state.stack_generation += 1
        return _state.release
