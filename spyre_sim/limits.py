"""Which device values an emulator limit may have reached.

The emulator holds DL16 numbers in fp16 host tensors; where a number lies beyond what those
hold (``fp16-range``, ``fp16-holder``: :mod:`spyre_sim._wide_values`) and is read or handed to
the host, the emulator's results are no longer the device's from there on, and telemetry
counts an *emulator limit*. Not every value of the test after that depends on it: a value the
device computed before the limit was met, and has not written since, cannot.

So, from the first limit met after :func:`reset` on, every op on the device notes the storages
it writes (fresh results, inputs written in place; views write nothing), and
:func:`reached` tells whether a tensor's values may come from after the limit: ``False`` only
for a device tensor whose storage was not written since. The pytest plugin resets at each
test and asks about the two sides of a failed closeness check, so that a test whose compared
values were all computed before the limit is judged on the comparison (precision), not on the
limit. Nothing is tracked until a limit is met: the ops of a test without one pay one flag
test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spyre_sim import telemetry
from spyre_sim.state import device_state

if TYPE_CHECKING:
    from spyre_sim._op_info import OpInfo

__all__ = ["MOST_NOTED", "met", "note_new", "note_written", "reached", "reset", "tracking"]

#: How many storages are noted at most; beyond, every value counts as reached (a process that
#: never resets, such as a long script after one limit, must not grow the set without bound).
MOST_NOTED = 1 << 20


def reset() -> None:
    """Forget limits met and storages written (the plugin calls it as each test starts)."""
    device_state.limit_met = False
    device_state.limit_written.clear()
    device_state.limit_overflow = False


def met(kind: str, module_path: str | None) -> None:
    """Count one emulator limit of ``kind`` (telemetry) and track writes from here on."""
    telemetry.count_emulator_limit(kind, module_path)
    device_state.limit_met = True


def tracking() -> bool:
    """Whether a limit was met since :func:`reset`."""
    return device_state.limit_met


def _address(tensor: Any) -> int:
    return int(tensor._host.untyped_storage().data_ptr())


def note_written(info: OpInfo, out: Any) -> None:
    """Note the storages an op wrote: its results, but those that are views of an input (the
    op dispatch calls this only while :func:`tracking`)."""
    from spyre_sim._tensor import SpyreTensor

    if type(out) is SpyreTensor:
        if info.writes_output(0):
            _note(out)
    elif isinstance(out, (tuple, list)):
        for i, item in enumerate(out):
            if type(item) is SpyreTensor and info.writes_output(i):
                _note(item)


def note_new(tensor: Any) -> None:
    """Note a device tensor made outside an op (a transfer in, a deep copy) while
    :func:`tracking`: its values are written after the limit."""
    if device_state.limit_met:
        _note(tensor)


def _note(tensor: Any) -> None:
    if device_state.limit_overflow:
        return  # every value counts as reached already
    written = device_state.limit_written
    written.add(_address(tensor))
    if len(written) > MOST_NOTED:
        written.clear()
        device_state.limit_overflow = True


def reached(values: Sequence[Any]) -> bool | None:
    """Whether a limit met since :func:`reset` may have reached any of ``values``: ``None``
    when none was met; ``False`` when every one is a device tensor whose storage the device
    has not written since the first limit; ``True`` otherwise (a host tensor or a number may
    hold anything the test computed from the device)."""
    if not device_state.limit_met:
        return None
    from spyre_sim._tensor import SpyreTensor

    if device_state.limit_overflow:
        return True
    written = device_state.limit_written
    return any(type(value) is not SpyreTensor or _address(value) in written for value in values)
