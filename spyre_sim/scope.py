"""Model scope and harness: which ops on ``spyre`` tensors the stack would compile.

The stack compiles a model's computation: what runs inside an ``nn.Module`` forward, and inside
a generation call with what it runs (logits processors, stopping criteria, cache updates). A
test suite also does other work on device tensors: it builds inputs on the device, compares and
asserts on outputs, prints them, probes the device (Transformers' fp16 check is a 2x2 matmul on
it). That is the **harness**: host code the stack never sees.

:func:`in_model_scope` tells the two apart:

- inside any module forward (the running-module stack of :mod:`spyre_sim._modules`);
- inside :func:`model_scope` (for model computation that is not a module forward: a functional
  model, a hand-written decode loop);
- inside a ``generate`` method of an ``nn.Module`` (Transformers' ``GenerationMixin.generate``
  and every model's override of it), found on the Python call stack.

With ``settings.judge_harness`` off (``pytest --spyre`` does that by default), harness ops get
host semantics: they run the host kernel without a decision, layout rule or fallback, and are
counted as harness ops in telemetry. Their results are still device tensors stored the way the
device stores them (DL16 for fp16, int32 for int64), so values that enter the model are device
values. With it on (the device's own default, and ``--spyre-harness device``), every op on a
``spyre`` tensor is judged by the catalogue wherever it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType

import torch

from spyre_sim.state import device_state

__all__ = ["in_model_scope", "model_scope"]

_state = device_state
# code objects named "generate": whether they are methods of an nn.Module (decided once each)
_generate_codes: dict[CodeType, bool] = {}
_GENERATE = "generate"


@contextmanager
def model_scope() -> Iterator[None]:
    """Treat everything inside the block as model computation (judged by the catalogue)::

    with spyre_sim.model_scope():
        logits = my_decode_loop(model, ids)
    """
    depth = _state.scope_depth
    _state.scope_depth = depth + 1
    try:
        yield
    finally:
        # back to the depth at entry, not one less than now: a ``device_state.reset()`` inside
        # the block must not leave the depth below zero (every op judged inside-out after it)
        _state.scope_depth = depth


def in_model_scope() -> bool:
    """Whether an op issued now belongs to a model's computation (see the module docstring)."""
    if _state.module_stack or _state.scope_depth:
        return True
    return _in_generate()


def _in_generate() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == _GENERATE:
            known = _generate_codes.get(code)
            if known is None:
                owner = frame.f_locals.get("self")
                known = _generate_codes[code] = isinstance(owner, torch.nn.Module)
            if known:
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def reset() -> None:
    """Leave every :func:`model_scope` (after an interrupted block in tests)."""
    _state.scope_depth = 0
