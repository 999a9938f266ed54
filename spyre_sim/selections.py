"""Did rounding's choice of experts make the difference? Replay the CPU's top-k choices.

The device counts a top-k row whose k-th and (k+1)-th values are within one DL16 step
(``telemetry.snapshot().rounding_ties``, :mod:`spyre_sim._selection_ties`): rounding ordered
them, and the CPU may have chosen the other. When such a run's output differs from the CPU's,
that is a cause, not yet a proof. :func:`recording` notes the CPU's top-k choices, in call order;
:func:`replaying` runs the device again and, at each ``aten.topk`` call, where a row is tied
at DL16 resolution and chose other indices than the CPU did, takes the CPU's indices (and the
device's own values at them). Rows that are not tied keep the device's choice, so a top-k that
is wrong for another reason stays wrong. If the replayed output matches the CPU, the tied
selections were the whole difference: precision, not a wrong answer::

    with spyre_sim.selections.recording() as cpu_choices:
        expected = model(**inputs).logits
    ...                                                  # model.to("spyre"), feed on the device
    with spyre_sim.selections.replaying(cpu_choices) as replay:
        got = model(**feed).logits.cpu()
    replay.replaced, replay.aligned                      # rows taken from the CPU; calls lined up

The two runs must make the same top-k calls in the same order (the same model and inputs do):
at the first call whose input shape, ``k``, ``dim`` or ``largest`` is not the CPU's (an adapter
that pads the experts, a decoding that took another path) the replay stops replacing and
``aligned`` is ``False``. A diagnosis tool: nothing of it runs unless asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from spyre_sim._selection_ties import tied_rows, topk_arguments

__all__ = ["Choice", "Replay", "recording", "replaying"]

_TOPK = torch.ops.aten.topk.default


@dataclass(frozen=True)
class Choice:
    """One ``aten.topk`` call of a CPU run: its input shape, arguments and chosen indices."""

    shape: tuple[int, ...]
    k: int
    dim: int
    largest: bool
    indices: torch.Tensor


@dataclass
class Replay:
    """What :func:`replaying` did: ``calls`` top-k calls seen, ``replaced`` rows given the CPU's
    indices, ``aligned`` ``False`` from the first call that did not line up with the CPU's."""

    choices: list[Choice]
    calls: int = 0
    replaced: int = 0
    aligned: bool = True
    mismatched: list[str] = field(default_factory=list)


class _Record(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.choices: list[Choice] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is _TOPK:
            k, dim, largest = topk_arguments(args, kwargs or {})
            indices = out[1].detach().to("cpu", torch.int64)
            self.choices.append(Choice(tuple(args[0].shape), k, dim, largest, indices))
        return out


class _Replay(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, replay: Replay) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.replay = replay

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is not _TOPK or not self.replay.aligned:
            return out
        replay = self.replay
        call = replay.calls
        replay.calls += 1
        k, dim, largest = topk_arguments(args, kwargs or {})
        signature = (tuple(args[0].shape), k, dim % max(args[0].dim(), 1), largest)
        if call >= len(replay.choices):
            replay.aligned = False
            replay.mismatched.append(f"top-k call {call}: the CPU made only {call}")
            return out
        cpu = replay.choices[call]
        expected = (cpu.shape, cpu.k, cpu.dim % max(len(cpu.shape), 1), cpu.largest)
        if signature != expected:
            replay.aligned = False
            replay.mismatched.append(f"top-k call {call}: {signature} on the device, {expected}")
            return out
        values = args[0].detach().cpu()
        tied = tied_rows(values, k, dim, largest)
        if tied is None:
            return out
        device_indices = out[1].detach().to("cpu", torch.int64)
        dim = dim % values.dim()
        same = device_indices.sort(dim).values.eq(cpu.indices.sort(dim).values).all(dim)
        take = (tied & ~same).unsqueeze(dim)
        if not bool(take.any()):
            return out
        replay.replaced += int(take.sum())
        indices = torch.where(take, cpu.indices, device_indices)
        chosen = values.gather(dim, indices)
        return (
            chosen.to(out[0].dtype).to(out[0].device),
            indices.to(out[1].dtype).to(out[1].device),
        )


@contextmanager
def recording() -> Iterator[list[Choice]]:
    """Note every ``aten.topk`` call's choice in the block (a CPU run), in call order."""
    mode = _Record()
    with mode:
        yield mode.choices


@contextmanager
def replaying(choices: list[Choice]) -> Iterator[Replay]:
    """Run the block (a device run) with the CPU's ``choices`` taken at the rows of each
    ``aten.topk`` call that rounding tied and that chose otherwise (module docstring)."""
    replay = Replay(list(choices))
    with _Replay(replay):
        yield replay
