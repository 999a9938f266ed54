"""Adapters see a model's stock forwards under accelerate's hooks, and keep the hooks.

``accelerate`` (``from_pretrained(..., device_map=...)``, ``cpu_offload``, ``disk_offload``,
``dispatch_model``) wraps the forward of the modules it manages: ``add_hook_to_module`` keeps the
forward in ``module._old_forward``, sets ``module._hf_hook`` and binds ``module.forward`` to a
wrapper that runs the hook around ``module._old_forward`` (looked up at each call). Adapters
match by structure, often by the forward's code or by "no forward bound to this instance", so a
hooked model looked unlike its stock form: a ViT loaded with offloaded weights got neither
``sdpa-key-padding`` (its attention's forward hid behind the wrapper) nor ``layernorm-two-pass``,
and computed other numbers than the same model moved with ``.to``.

:func:`stock_forwards` shows the model as it is under the hooks while adapters are applied or
undone: each hooked module's ``forward`` is its ``_old_forward`` (for a class forward, no
instance attribute at all). On leaving, whatever forward the module then has (an adapter's, or
the stock one again after ``restore``) becomes ``_old_forward``, and the hook's wrapper is put
back as ``forward``: the hook keeps running around the adapted forward.

Offloaded weights are on the ``meta`` device between forwards (the hook brings them in for each
call). Adapters that match by behaviour (the norm adapters run the module on a probe) need the
values, so inside :func:`stock_forwards` every module with offloaded weights holds them on the
host, brought in and sent back by its own hook (``accelerate.utils.align_module_device``), as a
forward would. That costs host memory for the offloaded weights while adapters are applied or
undone, never device memory. Models without hooks go through untouched.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["stock_forwards"]

_HOOK = "_hf_hook"
_INNER = "_old_forward"


@dataclass(frozen=True)
class _Hooked:
    module: nn.Module
    wrapper: Any  # the hook's forward
    inner: Any  # the forward the hook wraps, as the module held it
    class_forward: bool  # ``inner`` is the class's forward bound to the module
    offloaded: bool  # the hook keeps the module's weights off the module between forwards


def _is_class_forward(module: nn.Module, forward: Any) -> bool:
    return (
        isinstance(forward, types.MethodType)
        and forward.__self__ is module
        and forward.__func__ is type(module).forward
    )


def _hooked(model: nn.Module) -> list[_Hooked]:
    found = []
    for module in model.modules():
        attributes = module.__dict__
        if _HOOK in attributes and _INNER in attributes and "forward" in attributes:
            inner = attributes[_INNER]
            offloaded = bool(getattr(attributes[_HOOK], "offload", False))
            found.append(
                _Hooked(
                    module,
                    attributes["forward"],
                    inner,
                    _is_class_forward(module, inner),
                    offloaded,
                )
            )
    return found


@contextmanager
def stock_forwards(model: nn.Module) -> Iterator[None]:
    """While inside, every accelerate-hooked module of ``model`` shows the forward its hook
    wraps; on leaving (also on an error), the forward it then has goes under the hook again
    (see the module docstring)."""
    hooked = _hooked(model)
    if not hooked:
        yield
        return
    for entry in hooked:
        attributes = entry.module.__dict__
        if entry.class_forward:
            del attributes["forward"]
        else:
            attributes["forward"] = entry.inner
    try:
        with ExitStack() as weights:
            _bring_in_offloaded(hooked, weights)
            yield
    finally:
        for entry in hooked:
            attributes = entry.module.__dict__
            current = attributes.get("forward")
            if current is None:  # the class's forward: keep the bound method the hook had
                current = (
                    entry.inner
                    if entry.class_forward
                    else types.MethodType(type(entry.module).forward, entry.module)
                )
            attributes[_INNER] = current
            attributes["forward"] = entry.wrapper


def _bring_in_offloaded(hooked: list[_Hooked], stack: ExitStack) -> None:
    """Hold the offloaded weights of the hooked modules on the host until ``stack`` closes."""
    offloaded = [entry.module for entry in hooked if entry.offloaded]
    if not offloaded:
        return
    from accelerate.utils import align_module_device  # present: its hooks are

    host = torch.device("cpu")
    for module in offloaded:
        stack.enter_context(align_module_device(module, host))
