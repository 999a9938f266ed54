"""``rotate_half`` as a multiplication by its signed permutation: the ``rotate-half-matmul``
adapter (gap ``rotate-half``).

The stack miscompiles the stock ``rotate_half`` (slice the head in halves, negate, concatenate:
wrong numbers in fp16, no error; open at every release). ``rope-rotation`` answers it for the
standard rotary layout, and declines where its host tables cannot be built: Gemma 4's attention
(DiffusionGemma's encoder and decoder) has layers of two head sizes, its own
``apply_rotary_pos_emb(x, cos, sin)`` and ``proportional`` RoPE, so every DiffusionGemma test
ran its RoPE through the miscompile.

This adapter leaves the tables to the model and changes only the rotation: inside the forwards
it binds, ``rotate_half(x)`` is ``x @ P``, where ``P`` is the signed permutation the family's
own ``rotate_half`` performs, measured from it (``rotate_half(I)``) for each head width the first
time the width is met and checked on random values; a function that is not a signed
permutation keeps its stock form. ``P`` holds only -1, 0 and 1, so each output is one input
value, negated or not: the same values as the stock function (for finite inputs).

Matched structurally: every module whose forward (decorator chain included) calls a function
of its modeling module that reaches ``rotate_half`` (``apply_rotary_pos_emb`` and the like),
where the module's ``rotate_half`` is a signed permutation, and that ``rope-rotation`` did not
adapt already. The forward is bound, per instance, to a copy whose module globals hold copies
of those functions that call the matmul form; no module-level global is touched. Nothing the
model shows changes: parameters, buffers, state dict, config, output shapes.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import _clone, forward_function, rebind_globals
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["RotateHalfMatmul", "adapter", "matmul_rotate_half", "signed_permutation"]

_NAME = "rotate_half"
_MARK = "_spyre_rotate_half_matmul"
_PROBE_WIDTHS = (8, 16, 64)

Target = tuple[str, types.FunctionType, dict[str, Any], frozenset[str]]


def signed_permutation(rotate: Callable[[torch.Tensor], Any], width: int) -> torch.Tensor | None:
    """``P`` with ``rotate(x) == x @ P`` for ``width``-wide rows, when ``rotate`` is a signed
    permutation (checked exactly on random values); ``None`` otherwise."""
    try:
        with torch.no_grad():
            matrix = torch.as_tensor(rotate(torch.eye(width, dtype=torch.float64)))
            if matrix.shape != (width, width):
                return None
            entries = matrix.abs()
            if not bool(((matrix == 0) | (entries == 1)).all()):
                return None
            if not bool((entries.sum(0) == 1).all()) or not bool((entries.sum(1) == 1).all()):
                return None
            values = torch.randn(3, 5, width, dtype=torch.float64, generator=_generator())
            if not torch.equal(torch.as_tensor(rotate(values)), values @ matrix):
                return None
    except Exception:  # a function of another shape or form: not this adapter's
        return None
    return matrix.float()


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def matmul_rotate_half(stock: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    """A drop-in ``rotate_half`` computing ``x @ P`` with ``stock``'s signed permutation,
    measured per width; ``stock`` itself for a width where it is no signed permutation."""
    measured: dict[int, torch.Tensor | None] = {}
    placed: dict[tuple[int, torch.device, torch.dtype], torch.Tensor] = {}

    def rotate_half(x: torch.Tensor) -> Any:
        width = x.shape[-1]
        if width not in measured:
            measured[width] = signed_permutation(stock, width)
        matrix = measured[width]
        if matrix is None or not x.is_floating_point():
            return stock(x)
        slot = (width, x.device, x.dtype)
        on_device = placed.get(slot)
        if on_device is None:
            on_device = placed[slot] = matrix.to(device=x.device, dtype=x.dtype)
        return torch.matmul(x, on_device)

    setattr(rotate_half, _MARK, True)
    return rotate_half


def _reaching(owner: dict[str, Any]) -> frozenset[str]:
    """The names of ``owner``'s module-level functions that call ``rotate_half``, directly or
    through each other, decorated ones included (``rotate_half`` itself excluded)."""
    functions = {
        name: [f for f in _chain(value) if f.__globals__ is owner]
        for name, value in owner.items()
        if isinstance(value, types.FunctionType)
    }
    found = {_NAME}
    grew = True
    while grew:
        grew = False
        for name, own in functions.items():
            if name not in found and any(found & set(f.__code__.co_names) for f in own):
                found.add(name)
                grew = True
    return frozenset(found - {_NAME})


def _chain(fn: types.FunctionType) -> list[types.FunctionType]:
    chain, seen = [fn], {fn.__code__}
    for current in chain:
        for cell in current.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:
                continue
            if isinstance(content, types.FunctionType) and content.__code__ not in seen:
                seen.add(content.__code__)
                chain.append(content)
    return chain


def _target(path: str, module: nn.Module) -> Target | None:
    fn = forward_function(module)
    if fn is None:
        return None
    for f in _chain(fn):
        owner = f.__globals__
        stock = owner.get(_NAME)
        if not isinstance(stock, types.FunctionType) or getattr(stock, _MARK, False):
            continue
        names = _reaching(owner) & set(f.__code__.co_names)
        if not names:
            continue
        if any(getattr(owner.get(n), "_spyre_host_rotation", None) is not None for n in names):
            return None  # rope-rotation's rotation: adapted already
        if all(signed_permutation(stock, w) is not None for w in _PROBE_WIDTHS):
            return (path, fn, owner, names)
    return None


class RotateHalfMatmul(TargetedAdapter[Target]):
    """``rotate-half-matmul`` (see the module docstring)."""

    name = "rotate-half-matmul"
    missing = "no forward reaching a rotate_half that is a signed permutation"

    def targets(self, model: nn.Module) -> list[Target]:
        found = []
        for path, module in model.named_modules():
            if getattr(module.__dict__.get("forward"), _MARK, False):
                continue  # bound by this adapter already
            target = _target(path, module)
            if target is not None:
                found.append(target)
        return found

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[Target]) -> None:
        by_owner: dict[int, dict[str, Any]] = {}
        for path, fn, owner, _names in targets:
            overrides = by_owner.get(id(owner))
            if overrides is None:
                overrides = by_owner[id(owner)] = _overrides(owner)
            bound = rebind_globals(fn, owner, overrides)
            setattr(bound, _MARK, True)
            edit.bind_forward(model.get_submodule(path), bound)


def _overrides(owner: dict[str, Any]) -> dict[str, Any]:
    """The matmul ``rotate_half`` and copies of the functions reaching it, all resolving their
    names in one copy of ``owner`` that holds them (so a function calling another one calls
    its copy; a decorated one keeps its decorator, around a copy of what it wraps)."""
    patched = dict(owner)
    patched[_NAME] = matmul_rotate_half(owner[_NAME])
    reaching = _reaching(owner)
    for name in reaching:
        patched[name] = _clone(owner[name], owner, patched, 0)
    return {name: patched[name] for name in (_NAME, *reaching)}


adapter = RotateHalfMatmul()
