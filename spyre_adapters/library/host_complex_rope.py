"""Complex rotary embeddings computed on the host (gap ``complex``).

The device has no complex format, so ``torch.polar``, ``view_as_complex`` and ``view_as_real``
never lower (gap ``complex``, lasting: this adapter is permanent). DeepSeek-V2 and Llama 4 write
RoPE in complex form: the rotary module returns ``freqs_cis = torch.polar(ones, freqs)``, and a
helper of the attention module rotates the query and key pairs with
``view_as_real(view_as_complex(x.reshape(..., -1, 2)) * freqs_cis).flatten(3)``.

Matched structurally: every module whose forward names ``polar``, ``view_as_complex`` or
``view_as_real``, itself or through the functions of its module it calls (up to
:data:`DEPTH` calls deep; DeepSeek-V2's attention calls ``apply_rotary_emb``). Each gets a bound
forward that runs the stock one inside :class:`HostComplexMode`, which keeps every complex
value on the host, tagged with the device it stands for:

- ``polar`` and ``view_as_complex`` of device tensors run on host copies (float32, as the stock
  code asks with ``.float()``); the complex result stays on the host;
- any other op that takes a tagged complex value runs on the host as it is, and ``.to(device)``
  of one leaves it there (it is the device's value, held by the host);
- ``view_as_real`` of a tagged value moves the real result back to the device it stands for.

So only the real query and key enter and leave the host, and the rotation is the stock
arithmetic in float32; the rotated values enter the device as any host value does. A complex
value that reaches an op outside these forwards still meets the gap (an error, not a wrong
answer). On the CPU every step is the stock one.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector, ModeScopedForward

__all__ = ["DEPTH", "HostComplexMode", "HostComplexRope", "adapter", "reaches_complex"]

DEPTH = 3
_NAMES = ("polar", "view_as_complex", "view_as_real")
_HOME = "_spyre_complex_home"
_MARK = "_spyre_host_complex"
_ENTRIES = frozenset({torch.polar, torch.view_as_complex})


def reaches_complex(fn: types.FunctionType, depth: int = DEPTH) -> bool:
    """``fn`` names one of the complex functions, itself or through the functions of its
    globals it names, up to ``depth`` calls deep."""
    seen: set[types.CodeType] = set()
    pending = [(fn, 0)]
    while pending:
        current, level = pending.pop()
        current = inspect.unwrap(current)
        if not isinstance(current, types.FunctionType) or current.__code__ in seen:
            continue
        seen.add(current.__code__)
        if any(code_mentions(current, name) for name in _NAMES):
            return True
        if level < depth:
            for name in current.__code__.co_names:
                callee = current.__globals__.get(name)
                if isinstance(callee, types.FunctionType):
                    pending.append((callee, level + 1))
    return False


def _home(value: Any) -> torch.device | None:
    return getattr(value, _HOME, None) if isinstance(value, torch.Tensor) else None


def _tagged(value: Any, home: torch.device) -> Any:
    if isinstance(value, torch.Tensor) and value.is_complex():
        setattr(value, _HOME, home)
    return value


def _to_host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.cpu()
        return value.float() if value.dtype in (torch.float16, torch.bfloat16) else value
    return value


def _homes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.device]:
    """The devices the tagged complex arguments stand for (top level and one list deep)."""
    found = []
    for value in (*args, *kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            home = _home(item)
            if home is not None:
                found.append(home)
    return found


def _device_move(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``x.to(...)`` names a device only (no dtype, no other tensor to take one from)."""
    rest = [*args[1:], *kwargs.values()]
    return bool(rest) and all(isinstance(v, (torch.device, str, int)) for v in rest)


class HostComplexMode(TorchFunctionMode):
    """Keeps complex values on the host while active (see the module docstring)."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _ENTRIES:
            tensors = [v for v in tree_flatten((args, kwargs))[0] if isinstance(v, torch.Tensor)]
            if tensors:
                host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
                return _tagged(func(*host_args, **host_kwargs), tensors[0].device)
        homes = _homes(args, kwargs)
        if not homes:
            return func(*args, **kwargs)
        if func is torch.view_as_real:
            return func(*args, **kwargs).to(homes[0])
        if func is torch.Tensor.to and _home(args[0]) is not None and _device_move(args, kwargs):
            return args[0]  # the host holds the device's value: it stays there
        out = func(*args, **kwargs)
        return tree_map(lambda v: _tagged(v, homes[0]), out)


class HostComplexRope(ModeScopedForward):
    """The ``host-complex-rope`` adapter (see the module docstring)."""

    name = "host-complex-rope"
    missing = "no forward computes with complex numbers (polar, view_as_complex, view_as_real)"
    mode = HostComplexMode
    mark = _MARK

    def selects(self, model: nn.Module) -> ForwardSelector:
        return lambda module, fn: reaches_complex(fn)


adapter = HostComplexRope()
