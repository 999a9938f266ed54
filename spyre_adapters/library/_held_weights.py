"""A module's weight as it is now, also when accelerate has offloaded it.

An adapter that computes with a module's weight outside that module's own forward (on the host,
or in a form of its own) reads the weight at each call, so that weights loaded after
``prepare`` count. Under accelerate's offloading the weight lives on the ``meta`` device between
the module's forwards, and the module's hook brings it in only around them: reading it from
elsewhere fails with "Cannot copy out of meta tensor". :func:`host_weight` asks the module's
own hook to bring the weight in, takes a host copy, and lets the hook send it back.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["host_weight"]


def host_weight(module: nn.Module, name: str = "weight") -> torch.Tensor:
    """A float32 host copy of ``module``'s parameter or buffer ``name`` as it is now."""
    hook = module.__dict__.get("_hf_hook")
    if hook is None or not getattr(hook, "offload", False):
        held: torch.Tensor = getattr(module, name)
        return held.detach().to(device="cpu", dtype=torch.float32)
    from accelerate.utils import align_module_device  # present: its hook is

    with align_module_device(module, torch.device("cpu")):
        brought: torch.Tensor = getattr(module, name)
        return brought.detach().to(device="cpu", dtype=torch.float32, copy=True)
