"""``--spyre-compare``: run each top-level model forward on a CPU copy too, and measure agreement.

When a model moves to the device, :mod:`pytest_spyre.placement` keeps a deep copy of it on the
CPU (before any adapter touches it) and attaches a forward hook to the device model. Each forward
of the device model is then replayed on the copy with the inputs moved to the host, and the main
output (:mod:`spyre_adapters.main_output`: ``logits``, else ``last_hidden_state``, else the
floating-point output with the most values) is measured by the rule triage and the sweep use
(:mod:`spyre_adapters.agreement`):

- ``cosine``: cosine similarity of the flattened outputs (float64; ``-1.0`` when it cannot be
  measured);
- ``max_abs_diff``: largest absolute difference;
- ``top1``: for logits, the fraction of positions whose greedy token agrees, over the
  positions the CPU does not leave tied.

Forwards that carry a non-empty KV cache (decode steps of ``generate``) are not replayed: the
cache lives on the device and the copy has none. The prefill step and every plain forward are.

The copy follows the device model's weights: before a forward is replayed, every parameter or
buffer of the device model that changed since the first replayed forward (a checkpoint loaded
with ``load_state_dict`` after the move, an in-place initialisation; seen by tensor identity
and version counter) is copied into the copy as the device holds it. Without that, a test
that loads weights after ``.to("spyre")`` would be compared with the weights it started from.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from pytest_spyre.record import Agreement
from spyre_adapters.agreement import compare
from spyre_adapters.main_output import main_output

__all__ = ["CpuReference", "agreement"]


def agreement(model: str, device: torch.Tensor, reference: torch.Tensor, logits: bool) -> Agreement:
    """Measure a device output against its CPU reference (:func:`spyre_adapters.agreement.compare`).

    A cosine that cannot be measured (shapes differ, the device output is not finite) is
    recorded as ``-1.0``, below every measured one, so the worst agreement sorts first."""
    measured = compare(reference, device, logits=logits)
    cosine = measured.cosine if math.isfinite(measured.cosine) else -1.0
    return Agreement(model, cosine, measured.max_abs_error, measured.top1)


def _to_host(value: Any, floating: torch.dtype | None = None) -> Any:
    """``value`` (nested lists, tuples, dicts) with its device tensors on the host. ``floating``:
    the reference's floating dtype, given to a device float16 tensor when it is float32 (the
    device stores float32 as float16; the values are the ones the device used)."""
    if isinstance(value, torch.Tensor):
        host = value.detach().to("cpu")
        if value.device.type == "cpu":
            return host
        if host.dtype is torch.int32:
            # the device stores int64 as int32; the CPU reference gets the int64 a CPU run
            # has (its loss kernels refuse int32 targets)
            return host.to(torch.int64)
        if host.dtype is torch.float16 and floating is torch.float32:
            return host.to(torch.float32)
        return host
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v, floating) for v in value)
    if isinstance(value, dict):
        return {k: _to_host(v, floating) for k, v in value.items()}
    return value


def _is_cache(value: Any) -> bool:
    """A Transformers KV cache (``past_key_values`` / ``cache``, whatever the keyword)."""
    return callable(getattr(value, "get_seq_length", None))


def _floating_dtype(model: nn.Module) -> torch.dtype | None:
    for _, tensor in _state(model):
        if tensor.is_floating_point():
            return tensor.dtype
    return None


def _state(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    return itertools.chain(model.named_parameters(), model.named_buffers())


def _marks(state: dict[str, torch.Tensor]) -> dict[str, tuple[int, int]]:
    """Per parameter and buffer: its identity and version counter (an in-place write, such as
    ``load_state_dict``'s ``copy_``, increments the counter)."""
    return {name: (id(tensor), tensor._version) for name, tensor in state.items()}


def _has_cache(kwargs: dict[str, Any]) -> bool:
    """Whether a non-empty KV cache is passed (a decode step)."""
    return any(_is_cache(v) and v.get_seq_length() > 0 for v in kwargs.values())


class CpuReference:
    """A CPU copy of a model plus the forward hook that compares against it."""

    def __init__(self, model: nn.Module, sink: Callable[[Agreement], None]) -> None:
        self.reference = copy.deepcopy(model).to("cpu").eval()
        self.name = type(model).__name__
        self._sink = sink
        self._busy = False
        self._replay: list[bool] = []  # per nested call: replay it on the copy?
        self._marks: dict[str, tuple[int, int]] | None = None  # the device model's, as copied
        self._floating = _floating_dtype(self.reference)  # what its inputs are replayed in
        self._handles = (
            model.register_forward_pre_hook(self._pre_hook, with_kwargs=True),
            model.register_forward_hook(self._hook, with_kwargs=True),
        )

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    def _pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # decided before the forward: the device forward fills the cache it is given
        replay = not self._busy and not _has_cache(kwargs)
        self._replay.append(replay)
        if replay:
            self._follow(module)

    def _follow(self, model: nn.Module) -> None:
        """Copy into the reference what changed on the device model since the first replayed
        forward (see the module docstring); the first one only records the marks."""
        state = dict(_state(model))
        marks = _marks(state)
        previous, self._marks = self._marks, marks
        if previous is None:
            return
        changed = [name for name, mark in marks.items() if previous.get(name) != mark]
        if not changed:
            return
        reference = dict(_state(self.reference))
        with torch.no_grad():
            for name in changed:
                target = reference.get(name)
                if target is not None and target.shape == state[name].shape:
                    target.copy_(state[name].detach().to("cpu"))

    def _hook(
        self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        replay = self._replay.pop() if self._replay else False
        if not replay:
            return
        device_out = main_output(output)
        if device_out is None:
            return
        host_kwargs = {k: v for k, v in kwargs.items() if not _is_cache(v)}
        if "use_cache" in host_kwargs:
            host_kwargs["use_cache"] = False
        self.reference.train(module.training)
        self._busy = True
        try:
            with torch.no_grad():
                host_args = _to_host(args, self._floating)
                host_kwargs = _to_host(host_kwargs, self._floating)
                ref_out = main_output(self.reference(*host_args, **host_kwargs))
        finally:
            self._busy = False
        if ref_out is None:
            return
        logits = getattr(output, "logits", None) is device_out
        self._sink(agreement(self.name, device_out, ref_out, logits))
