"""The exceptions of :mod:`spyre_adapters`.

One base class, :class:`SpyreAdaptersError` (and :class:`UnknownReleaseError`, which is
:mod:`spyre_sim`'s: the catalogue's release lookup raises it). Every error carries the facts a test or a caller
needs as attributes; its message says what failed (value quoted), where (file and key, adapter
and module path), the rule, and the remedy.
"""

from __future__ import annotations

from collections.abc import Sequence

# One error for an unknown release name, raised by the catalogue's one release lookup
# (``spyre_sim.catalogue.Catalogue.release``) and re-exported here for the adapter layer.
from spyre_sim.errors import UnknownReleaseError

# One problem type and one message format for every validated input (catalogue, manifests,
# locks, waivers): :mod:`spyre_sim.problems`.
from spyre_sim.problems import Problem, problems_message

__all__ = [
    "AdapterApplyError",
    "AdapterOrderError",
    "AlreadyPreparedError",
    "DuplicateAdapterError",
    "LockError",
    "ManifestError",
    "PluginError",
    "PluginHookError",
    "Problem",
    "SpyreAdaptersError",
    "UnknownAdapterError",
    "UnknownReleaseError",
    "WaiverError",
]


class SpyreAdaptersError(Exception):
    """Base class of every error raised by :mod:`spyre_adapters`."""


class _ProblemsError(SpyreAdaptersError, ValueError):
    """An error listing every problem found at once (never only the first one)."""

    _subject = "data"

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__(problems_message(self._subject, self.problems))


class ManifestError(_ProblemsError):
    """Adapter manifests are invalid. ``problems`` lists every problem of every file, each
    naming the file and key; nothing from the set was registered."""

    _subject = "adapter manifests"


class WaiverError(_ProblemsError):
    """A waivers file is invalid; ``problems`` lists every problem with file and key."""

    _subject = "waivers"


class LockError(_ProblemsError):
    """A lock file is malformed, or does not match the installed adapters (tampered, missing
    entries). ``problems`` lists every problem with the lock entry it concerns."""

    _subject = "the adapter lock"


class DuplicateAdapterError(SpyreAdaptersError, ValueError):
    """The same adapter name and version was registered twice; names both sources."""

    def __init__(self, name: str, version: str, first: str, second: str) -> None:
        self.name = name
        self.version = version
        self.first = first
        self.second = second
        super().__init__(
            f"adapter {name!r} version {version} is registered twice: by {first} and by "
            f"{second}; each name+version must come from one source (uninstall one of them, "
            f"or disable a plugin with SPYRE_ADAPTERS_DISABLE=<plugin name>)"
        )


class PluginError(SpyreAdaptersError, RuntimeError):
    """A registration plugin failed; ``plugin`` names it, the cause is chained."""

    def __init__(self, plugin: str, reason: str) -> None:
        self.plugin = plugin
        self.reason = reason
        super().__init__(
            f"adapter plugin {plugin!r} failed to register: {reason} (fix the plugin, or "
            f"disable it with SPYRE_ADAPTERS_DISABLE={plugin})"
        )


class PluginHookError(PluginError):
    """A plugin implements a hook that does not exist (a misspelt name) or with arguments the
    hook does not offer. ``plugin`` and ``hook`` name them, ``known`` lists the known hooks."""

    def __init__(self, plugin: str, hook: str, known: Sequence[str], detail: str = "") -> None:
        self.hook = hook
        self.known = list(known)
        listing = ", ".join(self.known)
        what = detail or f"it implements {hook!r}, which is not a hook of spyre-adapters"
        super().__init__(plugin, f"{what} (known hooks: {listing})")


class UnknownAdapterError(SpyreAdaptersError, LookupError):
    """No registered adapter has this name (or version)."""

    def __init__(self, name: str, version: str | None, known: Sequence[str]) -> None:
        self.name = name
        self.version = version
        self.known = list(known)
        what = f"adapter {name!r}" + (f" version {version}" if version else "")
        listing = ", ".join(self.known) if self.known else "none"
        super().__init__(f"{what} is not registered (registered: {listing})")

    def __str__(self) -> str:  # LookupError would repr() the message otherwise
        return str(self.args[0])


class AlreadyPreparedError(SpyreAdaptersError, RuntimeError):
    """``prepare`` was called on a model already prepared differently."""

    def __init__(self, prepared_for: str, requested: str, detail: str) -> None:
        self.prepared_for = prepared_for
        self.requested = requested
        super().__init__(
            f"model is already prepared for stack {prepared_for} ({detail}); preparing it for "
            f"{requested} would stack two adapter sets: call spyre_adapters.restore(model) first"
        )


class AdapterApplyError(SpyreAdaptersError, RuntimeError):
    """An adapter failed while being matched or applied; the whole prepare was rolled back.

    ``adapter``/``version`` name it, ``stage`` is ``"load"`` (importing the entry point),
    ``"matches"`` or ``"apply"``, ``cause`` is
    the original exception (also chained as ``__cause__``), ``rolled_back`` lists the adapters
    already applied in this prepare that were undone.
    """

    def __init__(
        self,
        adapter: str,
        version: str,
        stage: str,
        cause: BaseException,
        rolled_back: Sequence[str],
    ) -> None:
        self.adapter = adapter
        self.version = version
        self.stage = stage
        self.cause = cause
        self.rolled_back = list(rolled_back)
        undone = f"; rolled back {', '.join(self.rolled_back)} too" if self.rolled_back else ""
        super().__init__(
            f"adapter {adapter!r} {version} failed in {stage if stage == 'load' else stage + '()'}: "
            f"{type(cause).__name__}: {cause}; the model was restored to its state before "
            f"prepare{undone}"
        )


class AdapterOrderError(SpyreAdaptersError, ValueError):
    """The ``after`` declarations of manifests cannot be honoured: ``adapter`` (a ``name
    version`` label) names adapters that are not registered (``unknown``), or the declarations
    form a cycle (``cycle``: the labels in order, the first repeated at the end)."""

    def __init__(
        self, adapter: str, *, unknown: Sequence[str] = (), cycle: Sequence[str] = ()
    ) -> None:
        self.adapter = adapter
        self.unknown = tuple(unknown)
        self.cycle = tuple(cycle)
        if self.unknown:
            message = (
                f"adapter {adapter} must follow {', '.join(map(repr, self.unknown))} (its "
                "manifest's `after`), which no registered adapter is called; install it, or "
                "correct the name in `after`"
            )
        else:
            message = (
                f"the `after` declarations form a cycle: {' -> '.join(self.cycle)}; no order "
                "applies each adapter after the ones it follows: remove one of them"
            )
        super().__init__(message)
