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
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
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


def _to_host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        host = value.detach().to("cpu")
        if value.device.type != "cpu" and host.dtype is torch.int32:
            # the device stores int64 as int32; the CPU reference gets the int64 a CPU run
            # has (its loss kernels refuse int32 targets)
            return host.to(torch.int64)
        return host
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_host(v) for k, v in value.items()}
    return value


def _is_cache(value: Any) -> bool:
    """A Transformers KV cache (``past_key_values`` / ``cache``, whatever the keyword)."""
    return callable(getattr(value, "get_seq_length", None))


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
        self._handles = (
            model.register_forward_pre_hook(self._pre_hook, with_kwargs=True),
            model.register_forward_hook(self._hook, with_kwargs=True),
        )

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    def _pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # decided before the forward: the device forward fills the cache it is given
        self._replay.append(not self._busy and not _has_cache(kwargs))

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
                ref_out = main_output(self.reference(*_to_host(args), **_to_host(host_kwargs)))
        finally:
            self._busy = False
        if ref_out is None:
            return
        logits = getattr(output, "logits", None) is device_out
        self._sink(agreement(self.name, device_out, ref_out, logits))
