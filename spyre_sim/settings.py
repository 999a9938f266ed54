"""Switches of the emulated device: DL16 numerics and layout checking.

``settings.numerics`` (default ``True``) rounds float16 values to the DL16-representable set
wherever the device stores them (see :mod:`spyre_sim.numerics`). Turn it off ("functional
mode") for suites whose tolerances were written for fp32 or plain fp16.

``settings.layout_checks`` (default ``True``) applies the stick, rank, offset and zero-length
rules of :mod:`spyre_sim.layout`. Turn it off to run a model whose shapes break a *lasting*
layout rule (e.g. head_dim 32 at ``sub-stick-head``) and still see every other gap.

``settings.judge_harness`` (default ``True``) applies the catalogue and the layout rules to
every op on a ``spyre`` tensor, wherever it runs. Turned off (``pytest --spyre`` does so by
default), ops outside the model scope -- the test harness building inputs, comparing, printing
-- get host semantics (see :mod:`spyre_sim.scope`).

Change them for a block with :func:`configure` (a context manager that restores the previous
values), or for the rest of the process with a plain ``configure(...)`` call or by assignment
(``spyre_sim.settings.numerics = False``). Nothing here is read from the environment.
"""

from __future__ import annotations

from types import TracebackType

__all__ = ["Settings", "configure", "settings"]


_SWITCHES = ("numerics", "layout_checks", "judge_harness")


class Settings:
    """The device switches. Every change bumps :attr:`generation`, which keys decision caches."""

    numerics: bool
    layout_checks: bool
    judge_harness: bool
    generation: int

    def __init__(self) -> None:
        object.__setattr__(self, "generation", 0)
        self.numerics = True
        self.layout_checks = True
        self.judge_harness = True

    def __setattr__(self, name: str, value: object) -> None:
        if name not in _SWITCHES:
            raise AttributeError(
                f"spyre_sim.settings has no switch {name!r}; the switches are "
                + ", ".join(repr(s) for s in _SWITCHES)
            )
        if not isinstance(value, bool):
            raise TypeError(f"spyre_sim.settings.{name} must be a bool (got {value!r})")
        object.__setattr__(self, name, value)
        object.__setattr__(self, "generation", self.generation + 1)

    def __repr__(self) -> str:
        return (
            f"Settings(numerics={self.numerics}, layout_checks={self.layout_checks}, "
            f"judge_harness={self.judge_harness})"
        )


settings = Settings()


class _Configured:
    """Returned by :func:`configure`: the change is already applied; ``with`` restores it."""

    def __init__(self, previous: dict[str, bool]) -> None:
        self._previous = previous

    def __enter__(self) -> Settings:
        return settings

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for name, value in self._previous.items():
            setattr(settings, name, value)


def configure(
    *,
    numerics: bool | None = None,
    layout_checks: bool | None = None,
    judge_harness: bool | None = None,
) -> _Configured:
    """Set device switches now; used as a context manager, restore them on exit.

    >>> with configure(layout_checks=False):   # functional mode for lasting layout gaps
    ...     pass
    """
    previous: dict[str, bool] = {}
    wanted = {"numerics": numerics, "layout_checks": layout_checks, "judge_harness": judge_harness}
    for name, value in wanted.items():
        if value is not None:
            previous[name] = getattr(settings, name)
            setattr(settings, name, value)
    return _Configured(previous)
