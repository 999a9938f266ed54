"""fused-projection-split 2.1.0: picks of a packed buffer that start inside its rows computed as
one-hot matmuls while the release misreads such views. Exact against the stock computation on
the CPU; on the device the Hiera configuration the differential campaign drew, whose keys 2.0.0
left to the misread copy, matches the CPU."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, modes_in, registry_where
from packaging.version import Version
from torch import nn

import spyre_sim
from spyre_adapters import Registry
from spyre_adapters.enablement.differential import Case, Outcome, build_case, run_case
from spyre_adapters.library.packed_picks import PackedPicksMode, _one_int, adapter, pick
from spyre_sim.layout import offset_in_row

#: drawn by the differential campaign (seed 0): mask-unit attention over packed QKV cut by
#: ``reshape(b, -1, nw, 3, h, d).permute(3, 0, 4, 2, 1, 5).unbind(0)``
HIERA = {
    "family": "hiera",
    "sizes": {"name": "drawn", "hidden": 128, "heads": 1, "head_dim": 128, "kv_heads": 1,
              "intermediate": 200, "layers": 2, "vocab": 256, "experts": 4,
              "experts_per_token": 2, "image_size": 32, "patch_size": 8,
              "audio_positions": 32, "seq_len": 65, "batch": 3},
    "features": {"partial_rotary": 0.25, "tie_embeddings": True, "sliding_window": 4},
    "attention": "eager", "padding": "right", "seed": 25224, "decode": False,
}  # fmt: skip


class _PackedAttention(nn.Module):
    """Hiera's pattern, small: one projection packed as ``[b, s, 3, h, d]``, picked on dim 0
    after a permute, in the three ways a forward picks (``unbind``, ``select``, ``x[i]``)."""

    def __init__(self, how: str, heads: int = 2, head_dim: int = 64) -> None:
        super().__init__()
        self.how, self.heads, self.head_dim = how, heads, head_dim
        self.qkv = nn.Linear(heads * head_dim, 3 * heads * head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.how == "unbind":
            q, k, v = qkv.unbind(0)
        elif self.how == "select":
            q, k, v = (qkv.select(0, i) for i in range(3))
        else:
            q, k, v = qkv[0], qkv[1], qkv[-1]
        scores = (q @ k.transpose(-1, -2)).softmax(dim=-1)
        out: torch.Tensor = scores @ v
        return out


def test_pick_is_select_bit_for_bit_in_every_dtype_and_dim() -> None:
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(3, 5, 4, 7).to(dtype)
        for dim in range(-4, 4):
            for at in range(-x.shape[dim], x.shape[dim]):
                ours = pick(x, dim, at)
                assert ours.shape == x.select(dim, at).shape
                assert torch.equal(ours, x.select(dim, at)), (dtype, dim, at)


def test_one_int_reads_only_plain_picks() -> None:
    x = torch.empty(2, 3, 4)
    assert _one_int(x, 1) == (0, 1)
    assert _one_int(x, (slice(None), -1)) == (1, -1)
    assert _one_int(x, (Ellipsis, 2)) == (2, 2)
    assert _one_int(x, (Ellipsis, 1, slice(None))) == (1, 1)
    assert _one_int(x, (1, 2)) is None  # two ints
    assert _one_int(x, (slice(1, None), 0)) is None  # a partial slice
    assert _one_int(x, (None, 0)) is None
    assert _one_int(x, True) is None
    assert _one_int(x, torch.tensor(1)) is None


def assert_stock_on_the_cpu(adapter: Any, how: str) -> None:
    """``_PackedAttention(how)`` adapted by ``adapter`` gives the stock values and state dict
    keys on the CPU, at a release that misreads packed views (the picks are computed)."""
    torch.manual_seed(0)
    stock = _PackedAttention(how)
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    x = torch.randn(2, 5, 128)
    with spyre_sim.use_stack("2026.05"), torch.no_grad():
        # The picks are bit-exact (test above), but they are contiguous where the stock views
        # are strided, and the host's BLAS may take another fp32 kernel for the products that
        # follow (seen: 6.6e-07 apart on one x86_64 machine, equal on another).
        torch.testing.assert_close(adapted(x), stock(x))
    assert adapted.state_dict().keys() == stock.state_dict().keys()


@pytest.mark.parametrize("how", ["unbind", "select", "getitem"])
def test_same_results_as_stock_on_the_cpu_and_same_state(how: str) -> None:
    assert_stock_on_the_cpu(adapter, how)


class _WritesIntoPicks(nn.Module):
    """Writes into picks of a packed buffer in the three ways, then reads the buffer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = (x * 1).reshape(2, 5, 3, 64).permute(2, 0, 1, 3)
        _, k, _ = packed.unbind(0)
        k.mul_(2.0)
        v = packed.select(0, 2)
        v += 1.0
        q = packed[1]  # k again: a pick of a pick's source, written through __setitem__
        q[:, 0] = 0.5
        out: torch.Tensor = packed.sum(dim=(1, 2))
        return out


def test_writes_into_a_computed_pick_reach_the_buffer() -> None:
    torch.manual_seed(0)
    stock = _WritesIntoPicks()
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)
    x = torch.randn(2, 5, 192)
    with spyre_sim.use_stack("2026.05"), torch.no_grad():
        assert torch.equal(adapted(x), stock(x))


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def test_only_picks_that_start_inside_a_row_are_rewritten() -> None:
    packed = torch.randn(2, 5, 3, 64).permute(2, 0, 1, 3)
    assert offset_in_row(packed.unbind(0)[1]) != 0
    whole = torch.randn(4, 64)
    ints = torch.arange(24).view(2, 3, 4).permute(1, 0, 2)
    with PackedPicksMode():
        pieces = packed.unbind(0)
        row = whole[2]  # a whole row of its buffer
        picked = ints[1]  # starts inside a row, but not floating
    # one piece starts inside a row: all three computed (new, contiguous tensors)
    assert not any(_shares(p, packed) for p in pieces)
    assert all(p.is_contiguous() for p in pieces)
    assert _shares(row, whole)  # left as the stock views
    assert _shares(picked, ints)


def _modes_during_forward(stack: str) -> set[type]:
    model = nn.Sequential(nn.Linear(64, 64), nn.Identity())
    apply(adapter, model)
    return modes_in(model, model[1], stack, torch.randn(1, 64))


def test_mode_is_entered_only_where_the_release_misreads_offset_views() -> None:
    assert PackedPicksMode in _modes_during_forward("2026.05")
    assert PackedPicksMode not in _modes_during_forward("2026.09")


def test_rollback_restores_the_model_exactly() -> None:
    model = _PackedAttention("unbind")
    x = torch.randn(2, 5, 128)
    assert_rollback_exact(adapter, model, lambda m: m(x))


def _upto(newest: str) -> Registry:
    """The built-in registry with ``fused-projection-split`` ``newest`` the newest version
    (later versions are tested against 2.1.0 in their own files)."""
    return registry_where(
        lambda m: m.name != "fused-projection-split" or m.version <= Version(newest)
    )


@pytest.mark.parametrize("release", ["2026.05", "2026.08"])
def test_hiera_packed_qkv_matches_on_the_device(spyre: ModuleType, release: str) -> None:
    case = Case.from_json(HIERA)
    built = build_case(case)
    run = run_case(case, built, release, registry=_upto("2.1.0"))
    assert run.outcome is Outcome.MATCH, run.detail
    assert "fused-projection-split 2.1.0" in run.adapters
    assert "offset-view-input" not in run.miscompiles
    before = run_case(case, built, release, registry=_upto("2.0.0"))
    assert before.outcome is Outcome.MISSED, before.detail  # what 2.0.0 left: said so, not silent
    assert "offset-view-input" in before.miscompiles
