"""The exceptions of :mod:`spyre_sim`.

One base class, :class:`SpyreSimError`; every error carries the facts a test or a layer above
needs as attributes, and its message says what failed, where, the rule, and the remedy.
"""

from __future__ import annotations

from collections.abc import Sequence

from spyre_sim.problems import Problem, problems_message

__all__ = [
    "CatalogueError",
    "InferenceOnlyError",
    "SpyreDowncastWarning",
    "SpyreFallbackWarning",
    "SpyreSimWarning",
    "SpyreLayoutError",
    "ONE_CARD",
    "SpyreDeviceIndexError",
    "SpyreLoweringError",
    "SpyreSimError",
    "SpyreStackResolutionWarning",
    "UnknownReleaseError",
]


class SpyreSimError(Exception):
    """Base class of every error raised by :mod:`spyre_sim`."""


class SpyreLoweringError(SpyreSimError, RuntimeError):
    """An op on a ``spyre`` tensor cannot be lowered by the active stack release.

    Attributes are stable and meant to be read by tests and by the layers above:

    - ``op``: the ATen overload, e.g. ``"aten.sin.default"``;
    - ``dtypes`` / ``shapes``: of the tensor arguments, in order;
    - ``release``: the active stack release name, e.g. ``"2026.05"``;
    - ``gap``: the gap id from the catalogue (``"sin-cos"``);
    - ``closes_in``: the first release at or after ``release`` that closes the gap, or
      ``None`` when no known release does (``lasting`` gaps, or still open);
    - ``runs_from``: the first release at or after ``release`` where the op runs at all (a
      cpu-fallback counts), or ``None`` (no known release, or a layout rule);
    - ``lasting``: the gap is a lasting hardware property;
    - ``module_path``: dotted path of the ``nn.Module`` whose forward was running, or ``None``;
    - ``reason``: the rule that failed, in words;
    - ``hints``: extra remedies added by layers above (e.g. the adapter that bridges the gap);
    - ``in_training``: raised in a training step: gradients enabled and the running model in
      training mode with trainable parameters (the device is inference-only; such a stop is
      out of scope, not a gap of inference).
    """

    def __init__(
        self,
        *,
        op: str,
        release: str,
        gap: str,
        reason: str,
        dtypes: Sequence[str] = (),
        shapes: Sequence[tuple[int, ...]] = (),
        closes_in: str | None = None,
        lasting: bool = False,
        module_path: str | None = None,
        hints: Sequence[str] = (),
        runs_from: str | None = None,
        in_training: bool = False,
    ) -> None:
        self.op = op
        self.release = release
        self.gap = gap
        self.reason = reason
        self.dtypes = tuple(dtypes)
        self.shapes = tuple(tuple(s) for s in shapes)
        self.closes_in = closes_in
        self.runs_from = runs_from
        self.in_training = in_training
        self.lasting = lasting
        self.module_path = module_path
        self.hints: list[str] = list(hints)
        super().__init__(op)

    def add_hint(self, hint: str) -> None:
        """Add a remedy (shown on its own line), e.g. ``"adapter `rope-rotation` bridges it"``."""
        if hint not in self.hints:
            self.hints.append(hint)

    @property
    def closes(self) -> str:
        """Where the op first runs and the gap closes, in words: ``"closed in 2026.09"``,
        ``"runs as a cpu-fallback from 2026.03, not lowered by any known release"``,
        ``"lasting"`` or ``"still open"``."""
        closed = f"closed in {self.closes_in}" if self.closes_in is not None else None
        if self.runs_from is not None and self.runs_from != self.closes_in:
            runs = f"runs (cpu-fallback) from {self.runs_from}"
            return f"{runs}, {closed}" if closed else f"{runs}, not lowered by any known release"
        if closed:
            return closed
        return "lasting" if self.lasting else "still open"

    def __str__(self) -> str:
        sig = ", ".join(f"{d}{list(s)}" for d, s in zip(self.dtypes, self.shapes, strict=False))
        where = f"; in {self.module_path}" if self.module_path else ""
        text = (
            f"{self.op}({sig}) is not lowered by stack {self.release}: {self.reason} "
            f"(gap `{self.gap}`, {self.closes}){where}"
        )
        for hint in self.hints:
            text += f"\n  hint: {hint}"
        return text


class SpyreLayoutError(SpyreLoweringError):
    """A layout rule of the device (sticks, rank, offsets, zero-length) rejects the op."""


class InferenceOnlyError(SpyreSimError, RuntimeError):
    """Autograd/backward was requested on the device, which is inference-only."""


#: The words every :class:`SpyreDeviceIndexError` message carries: a failure report finds them
#: in the text of an error that crossed a process boundary (a worker's traceback, as
#: ``torch.multiprocessing`` raises it in the parent), where the exception's type is lost.
ONE_CARD = "the emulated system has one spyre card"


class SpyreDeviceIndexError(SpyreSimError, ValueError):
    """A device index other than 0 was asked for (``torch.spyre.set_device(1)``): the emulator
    models one card. Code that puts process ``i`` of a job on device ``i`` (tensor or expert
    parallel over N ranks) needs N cards. ``index`` is the index asked for."""

    def __init__(self, index: object) -> None:
        self.index = index
        super().__init__(
            f"spyre:{index} does not exist: {ONE_CARD} (index 0); a job that puts one process "
            "on each device (tensor or expert parallel over N ranks) needs N cards"
        )


class CatalogueError(SpyreSimError, ValueError):
    """A stack-release file is malformed. ``problems`` lists every problem found, each a
    :class:`~spyre_sim.problems.Problem` shown as ``"<file>: <key>: <what is wrong> (got
    <value>)"``; the message shows all of them (:func:`~spyre_sim.problems.problems_message`)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__(problems_message("stack-release data", self.problems))


class UnknownReleaseError(SpyreSimError, LookupError):
    """A stack release name the catalogue does not know. ``spec`` is the name asked for,
    ``known`` the catalogue's release names (oldest first)."""

    def __init__(self, spec: str, known: Sequence[str]) -> None:
        self.spec = spec
        self.known = list(known)
        super().__init__(
            f"unknown stack release {spec!r}: expected one of {', '.join(self.known)} "
            f"or a path to a release TOML file"
        )

    def __str__(self) -> str:  # LookupError would repr() the message otherwise
        return str(self.args[0])


class SpyreSimWarning(UserWarning):
    """Base class of the warnings of :mod:`spyre_sim` (filter them all with this class)."""


class SpyreFallbackWarning(SpyreSimWarning):
    """An op ran on the host as a cpu-fallback: ``"<op> is falling back to cpu"``, once per op
    per process, like the real stack. Suites running with warnings as errors filter it, e.g.
    ``filterwarnings = ["ignore::spyre_sim.SpyreFallbackWarning"]``; telemetry counts every
    fallback either way."""


class SpyreDowncastWarning(SpyreSimWarning):
    """A float32/float64 tensor was stored as float16, or an int64 tensor as int32 (the device
    stores neither): once per process for each kind of conversion."""


class SpyreStackResolutionWarning(SpyreSimWarning):
    """An upstream version string (``0.0.1+g<sha>``, ``release-2026-09-22``) was resolved to a
    stack release of the catalogue: the message names the release and its upstream range,
    and says when the date lies after every modelled state. Once per string and process."""
