"""DL16 storage and host<->device transfers: what the device stores for a value.

The device stores fp16 values as DL16 (:mod:`spyre_sim.numerics`), float32/float64 as DL16 in
fp16 and int64 as int32 (warned once per process, :class:`~spyre_sim.errors.SpyreDowncastWarning`).
A host tensor entering the device is checked by the registered *transfer rules* (a gap of the
release refuses it: ``bool-storage``, ``zero-length``), counted by the registered *storage
gaps* (``fp32-storage``, ``no-inf``: properties that change the values moved) and changed by
the registered *entry effects* (``nan-entry``: a NaN reads back as -inf). Each is a function
registered with its gap id by a decorator (:func:`transfer_rule`, :func:`storage_gap`,
:func:`entry_effect`), the way :mod:`spyre_sim.layout` registers its rules.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from spyre_sim import _lowering, _modules, limits, telemetry
from spyre_sim._tensor import SpyreTensor, nbytes, wrap
from spyre_sim.errors import SpyreDowncastWarning, SpyreLayoutError, SpyreLoweringError
from spyre_sim.numerics import nan_enters_, round_to_dl16_, round_wide_to_dl16
from spyre_sim.settings import settings
from spyre_sim.stack import current_stack
from spyre_sim.state import device_state

_PROJECT_PACKAGES = ("spyre_sim", "spyre_adapters", "pytest_spyre")


FLOAT_WIDE = (torch.float32, torch.float64)


STORE_AS: dict[torch.dtype, torch.dtype] = {
    torch.float32: torch.float16,
    torch.float64: torch.float16,
    torch.int64: torch.int32,
}


#: Attribute of a device tensor made by a cast to float32/float64: the device stores its values
#: as DL16 (fp16), and moving it to the host outside the model gives them in the dtype cast to,
#: so the harness's ``out.float().cpu()`` comparison idiom sees float32 (the DL16 values,
#: widened exactly). Inside the model a transfer gives the stored fp16, as for every other
#: float32 tensor of the device (a host fallback then gets operands of one dtype).
READS_AS = "_spyre_reads_as"


# Ops whose fp16 results are input values (moved, selected, negated): DL16 inputs give DL16
# results, so rounding them again would change nothing. Skipping it is the cheapest win.
VALUE_PRESERVING = frozenset(
    {
        "aten.clone",
        "aten.cat",
        "aten.stack",
        "aten.neg",
        "aten.abs",
        "aten.relu",
        "aten.embedding",
        "aten.index_select",
        "aten.gather",
        "aten.index",
        "aten.repeat",
        "aten.flip",
        "aten.roll",
        "aten.amax",
        "aten.amin",
        "aten.max",
        "aten.min",
        "aten.maximum",
        "aten.minimum",
        "aten.where.self",
        "aten.expand_copy",
        "aten.permute_copy",
        "aten.transpose_copy",
        "aten.slice_copy",
        "aten.select_copy",
        "aten.topk",
        "aten.sort",
        "aten.tril",
        "aten.triu",
        "aten.copy_",
    }
)


_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_INTERNAL_DIRS = (
    os.path.dirname(torch.__file__ or "torch") + os.sep,
    *(os.path.join(_PROJECT, name) + os.sep for name in _PROJECT_PACKAGES),
)


def user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning to the first frame outside torch and this
    project's packages (the model or test line whose op met the device), for the function
    that calls ``warnings.warn``. Only computed when a once-per-process warning is issued."""
    frame = sys._getframe(1)  # the caller of warnings.warn
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def storage_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the device stores for ``dtype`` (fp32 -> fp16, int64 -> int32) when numerics
    emulation is on; unchanged otherwise."""
    if not settings.numerics:
        return dtype
    stored = STORE_AS.get(dtype, dtype)
    if stored is not dtype and dtype not in device_state.warned_dtypes:
        device_state.warned_dtypes.add(dtype)
        warnings.warn(
            f"the spyre device does not store {dtype}: stored as {stored} "
            "(warned once per process; spyre_sim.configure(numerics=False) keeps host dtypes)",
            SpyreDowncastWarning,
            stacklevel=user_stacklevel(),
        )
    return stored


def to_device_storage(host: torch.Tensor, fresh: bool) -> torch.Tensor:
    """What the device stores for a host tensor: dtype conversion and DL16 rounding.
    ``fresh``: ``host`` is owned by the caller and may be rounded in place."""
    if not settings.numerics:
        return host
    dtype = host.dtype
    if dtype is torch.float16:
        if not fresh:
            host = host.clone()
        return round_to_dl16_(host)
    stored = STORE_AS.get(dtype)
    if stored is not None:
        if stored is torch.float16:
            storage_dtype(dtype)  # the once-per-process downcast warning
            return round_wide_to_dl16(host, owned=fresh)  # one rounding, not fp16's first
        return host.to(storage_dtype(dtype))
    return host


def store_into(host: torch.Tensor, src: torch.Tensor) -> None:
    """Copy ``src`` (a host tensor, or another device tensor's host) into the device storage
    ``host``, stored the way the device stores it: a float32/float64 source into fp16 storage
    is rounded once to DL16 (not through fp16's own rounding first)."""
    if settings.numerics and host.dtype is torch.float16:
        if src.dtype in FLOAT_WIDE and src.dim() <= host.dim():
            src = round_wide_to_dl16(src.expand(host.shape) if src.shape != host.shape else src)
            host.copy_(src)
            return
        host.copy_(src)
        round_to_dl16_(host)
        return
    host.copy_(src)


def host_to_device(src: torch.Tensor) -> SpyreTensor:
    """Move a CPU tensor to the device (a transfer): checks, conversions, telemetry."""
    check_transfer(src)
    telemetry.count_transfer(True, nbytes(src))
    moved = wrap(entered(to_device_storage(src.detach().clone(), fresh=True)))
    limits.note_new(moved)
    return moved


# --- gap behaviour of transfers, registered by gap id -----------------------------------------

#: ``check(host tensor) -> reason`` when the gap refuses the transfer, else ``None``
TransferCheck = Callable[[torch.Tensor], "str | None"]
#: ``applies(host tensor) -> bool``: whether moving it changes its values because of the gap
StorageCheck = Callable[[torch.Tensor], bool]


@dataclass(frozen=True)
class TransferRule:
    """A gap that refuses a host->device transfer while open at the active release."""

    gap: str
    check: TransferCheck
    layout: bool  # a layout rule (off with layout_checks=False) vs a capability rule


@dataclass(frozen=True)
class StorageGap:
    """A storage property that changes the values moved: counted (``numerics``: only while
    numerics emulation is on); an entry effect also changes the host tensor in place."""

    gap: str
    applies: StorageCheck
    numerics: bool


_TRANSFER_RULES: list[TransferRule] = []
_STORAGE_GAPS: list[StorageGap] = []
_ENTRY_EFFECTS: list[StorageGap] = []


def transfer_rule(gap: str, *, layout: bool = False) -> Callable[[TransferCheck], TransferCheck]:
    """Register ``check`` as the refusal of host->device transfers by ``gap``."""

    def register(check: TransferCheck) -> TransferCheck:
        _TRANSFER_RULES.append(TransferRule(gap, check, layout))
        return check

    return register


def storage_gap(gap: str, *, numerics: bool = False) -> Callable[[StorageCheck], StorageCheck]:
    """Register ``applies`` as the storage property of ``gap`` (counted on every transfer)."""

    def register(applies: StorageCheck) -> StorageCheck:
        _STORAGE_GAPS.append(StorageGap(gap, applies, numerics))
        return applies

    return register


def entry_effect(gap: str) -> Callable[[StorageCheck], StorageCheck]:
    """Register ``apply`` (changes a host tensor entering the device in place, returns whether
    it changed anything) as the effect of ``gap``; runs with numerics emulation on."""

    def register(apply: StorageCheck) -> StorageCheck:
        _ENTRY_EFFECTS.append(StorageGap(gap, apply, True))
        return apply

    return register


def transfer_rules() -> tuple[TransferRule, ...]:
    """Every registered transfer rule."""
    return tuple(_TRANSFER_RULES)


def storage_gaps() -> tuple[StorageGap, ...]:
    """Every registered storage property and entry effect."""
    return (*_STORAGE_GAPS, *_ENTRY_EFFECTS)


@transfer_rule("bool-storage")
def _bool_storage(src: torch.Tensor) -> str | None:
    if src.dtype is torch.bool:
        return "a bool tensor cannot be stored on the device (bool is stored as DL16 from 2026.02)"
    return None


@transfer_rule("zero-length", layout=True)
def _zero_length(src: torch.Tensor) -> str | None:
    if src.numel() == 0 and src.dim() > 0:
        return f"a zero-length tensor {list(src.shape)} crashes the host->device copy"
    return None


@storage_gap("fp32-storage", numerics=True)
def _wide_float(src: torch.Tensor) -> bool:
    return src.dtype in FLOAT_WIDE


@storage_gap("no-inf")
def _holds_inf(src: torch.Tensor) -> bool:
    return src.is_floating_point() and bool(src.numel()) and bool(torch.isinf(src).any())


@entry_effect("nan-entry")
def _nan_entry(host: torch.Tensor) -> bool:
    return nan_enters_(host)


def entered(host: torch.Tensor) -> torch.Tensor:
    """The registered entry effects on a host tensor that entered the device (a NaN reads back
    as -inf: gap ``nan-entry``, :mod:`spyre_sim.numerics`), each counted when it applied."""
    if settings.numerics:
        for effect in _ENTRY_EFFECTS:
            if effect.applies(host):
                telemetry.count_gap(effect.gap, _modules.current_module_path())
    return host


def check_transfer(src: torch.Tensor) -> None:
    """Refuse a host->device transfer that an open gap forbids (only when judged: the harness
    moves it as the device stores it, never refused); count its storage gaps."""
    if _lowering.judged():
        release = current_stack()
        for rule in _TRANSFER_RULES:
            if rule.layout and not settings.layout_checks:
                continue
            if not release.gap_open(rule.gap):  # an unknown gap id is a bug of ours: it raises
                continue
            reason = rule.check(src)
            if reason is not None:
                cls = SpyreLayoutError if rule.layout else SpyreLoweringError
                _lowering.raise_gap(release, "aten._copy_from", rule.gap, [src], reason, cls)
    count_storage_gaps(src)


def count_storage_gaps(src: torch.Tensor) -> None:
    """Storage properties that change the values moved (whoever moves them)."""
    for found in _STORAGE_GAPS:
        if (settings.numerics or not found.numerics) and found.applies(src):
            telemetry.count_gap(found.gap, _modules.current_module_path())
