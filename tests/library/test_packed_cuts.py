"""fused-projection-split 2.3: 2.2's cuts and picks, and slices and pieces along any dim whose
view starts inside a row of its buffer, computed as exact selection matmuls while the release
misreads such views. Exact against the stock ops for every value, also for writes into the
cut; on the CPU the adapted model gives the stock outputs and state; on the device the
ProphetNet configuration the differential campaign drew, which 2.2.0 left to the misread copy,
matches the CPU."""

from __future__ import annotations

import copy
import warnings
from types import ModuleType
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, modes_in
from packaging.version import Version
from test_exact_selection import _same, _with_non_finite
from test_packed_picks import HIERA, _WritesIntoPicks
from test_stick_layout_chain import _BUILD, _upto, assert_bit_identical
from torch import nn

import spyre_sim
from spyre_adapters.enablement.differential import Case, Outcome, build_case, run_case
from spyre_adapters.library.packed_cuts import PackedCutsMode, adapter, cut, cut_index
from spyre_adapters.library.packed_picks_v2_2 import ExactPackedPicksMode
from spyre_sim.layout import offset_in_row

#: drawn by the differential campaign (seed 20261207): the decoder's n-gram streams are
#: ``hidden_states[:, sequence_length:]`` of ``[b, 3 * s, d]``, copied by ``lm_head``
PROPHETNET = {
    "family": "prophetnet",
    "sizes": {"name": "drawn", "hidden": 256, "heads": 4, "head_dim": 64, "kv_heads": 1,
              "intermediate": 256, "layers": 1, "vocab": 509, "experts": 4,
              "experts_per_token": 2, "image_size": 64, "patch_size": 16,
              "audio_positions": 32, "seq_len": 31, "batch": 2},
    "features": {"partial_rotary": None, "tie_embeddings": True, "sliding_window": None},
    "attention": None, "padding": "left", "seed": 41135, "decode": True,
}  # fmt: skip

#: drawn by the property test: head-padding's cuts (which write back through their own
#: record) inside the same forward; 2.3.0's first draft took their record for its own
DEEPSEEK_V2 = {
    "family": "deepseek_v2",
    "sizes": {"name": "drawn", "hidden": 64, "heads": 1, "head_dim": 64, "kv_heads": 1,
              "intermediate": 256, "layers": 2, "vocab": 256, "experts": 4,
              "experts_per_token": 2, "image_size": 32, "patch_size": 8,
              "audio_positions": 32, "seq_len": 7, "batch": 1},
    "features": {"partial_rotary": None, "tie_embeddings": None, "sliding_window": None},
    "attention": None, "padding": "none", "seed": 0, "decode": False,
}  # fmt: skip

#: drawn by the campaign (seed 20261207): the relative shift views ``scores[:, :, 1:]``, a
#: slice of a non-last dim, as the stock strides allow; 2.3.0's first draft returned the cut
#: strided along the cut dim and the view failed
WAV2VEC2_CONFORMER = {'family': 'wav2vec2-conformer', 'sizes': {'name': 'drawn', 'hidden': 128, 'heads': 2, 'head_dim': 64, 'kv_heads': 1, 'intermediate': 256, 'layers': 2, 'vocab': 1000, 'experts': 4, 'experts_per_token': 2, 'image_size': 32, 'patch_size': 8, 'audio_positions': 32, 'seq_len': 31, 'batch': 3}, 'features': {'partial_rotary': None, 'tie_embeddings': False, 'sliding_window': 4}, 'attention': None, 'padding': 'none', 'seed': 63901, 'decode': False}  # fmt: skip

_INDICES: list[Any] = [
    (slice(None), slice(3, None)),
    (slice(None), slice(1, 6, 2)),
    (slice(1, None), 2),
    (0, Ellipsis, slice(2, 5)),
    (None, slice(None), slice(4, None), None),
    (Ellipsis, slice(1, 3), slice(None)),
    (slice(None), -1),
    1,
    (slice(None), slice(2, 2)),  # empty
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("index", _INDICES, ids=repr)
def test_a_basic_index_is_the_stock_one_for_every_value(index: Any, dtype: torch.dtype) -> None:
    x = _with_non_finite(3, 7, 5, dtype=dtype)
    ours = cut_index(x, index)
    assert ours is not None
    assert _same(ours, x[index])


def test_indices_that_are_not_basic_are_left_alone() -> None:
    x = torch.randn(3, 4)
    for index in (torch.tensor([0, 2]), [0, 1], True, (None, Ellipsis), Ellipsis, (1, 2, 3)):
        assert cut_index(x, index) is None, index


@pytest.mark.parametrize("dim", range(-3, 3))
def test_cut_is_narrow_along_every_dim(dim: int) -> None:
    x = _with_non_finite(4, 6, 5)
    size = x.shape[dim]
    for start in range(size):
        for length in range(size - start + 1):
            assert _same(cut(x, dim, start, length), x.narrow(dim, start, length))


def _streams(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(2, 3 * 4, 64)


@pytest.mark.parametrize(
    "how",
    [
        lambda h: h[:, 4:],
        lambda h: h.narrow(1, 4, 8),
        lambda h: torch.narrow(h, 1, 4, 8),
        lambda h: h.split(4, dim=1),
        lambda h: torch.split(h, [4, 8], 1),
        lambda h: h.chunk(3, 1),
        lambda h: h.tensor_split(3, dim=1),
    ],
    ids=["getitem", "narrow", "torch.narrow", "split", "torch.split", "chunk", "tensor_split"],
)
def test_cuts_inside_a_row_are_computed_and_equal_the_stock_ones(how: Any) -> None:
    h = _streams(_with_non_finite(2, 12, 64))
    stock = how(h)
    pieces = stock if isinstance(stock, (tuple, list)) else (stock,)
    assert any(offset_in_row(p) != 0 for p in pieces)
    with spyre_sim.use_stack("2026.05"), PackedCutsMode():
        ours = how(h)
    mine = ours if isinstance(ours, (tuple, list)) else (ours,)
    assert type(ours) is type(stock)
    for p, s in zip(mine, pieces, strict=True):
        assert _same(p, s)
        assert offset_in_row(p) == 0  # nothing left for the device to misread


def test_a_computed_cut_takes_every_view_the_stock_cut_takes() -> None:
    scores = torch.randn(3, 2, 13, 12)
    stock = scores[:, :, 1:]
    with spyre_sim.use_stack("2026.05"), PackedCutsMode():
        ours = scores[:, :, 1:]
    assert offset_in_row(stock) != 0
    assert torch.equal(ours.view(3, 2, 12, 12), stock.view(3, 2, 12, 12))
    assert torch.equal(ours.view(-1), stock.reshape(-1))


def test_cuts_at_a_row_start_stay_views() -> None:
    h = torch.randn(2, 12, 64)
    with spyre_sim.use_stack("2026.05"), PackedCutsMode():
        first = h[:, :4]
        rows = h[1:]
    assert first.data_ptr() == h.data_ptr()
    assert rows._base is h


class _WritesIntoCuts(nn.Module):
    """Writes into cuts along the sequence dim, then reads the buffer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x * 1).reshape(2, 12, 64)
        tail = h[:, 4:]
        tail.mul_(2.0)
        middle = tail.narrow(1, 2, 3)  # a cut of a cut
        middle += 1.0
        *_, c = h.chunk(3, 1)
        c[:, 0] = 0.5
        packed = h.reshape(2, 12, 1, 64).permute(2, 0, 1, 3)
        packed[0, :, 5:].sub_(3.0)  # a pick, then a cut
        out: torch.Tensor = h.sum(dim=1)
        return out


@pytest.mark.parametrize("model", [_WritesIntoCuts, _WritesIntoPicks], ids=["cuts", "picks"])
def test_writes_into_a_computed_cut_reach_the_buffer(model: type[nn.Module]) -> None:
    torch.manual_seed(0)
    stock = model()
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)
    x = torch.randn(2, 5, 192) if model is _WritesIntoPicks else torch.randn(2, 768)
    with spyre_sim.use_stack("2026.05"), torch.no_grad():
        assert torch.equal(adapted(x), stock(x))


class _NgramStreams(nn.Module):
    """ProphetNet's pattern, small: a main stream and two n-gram streams in one buffer; the
    n-gram streams, cut along the sequence, go through a shared output projection."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(64, 64)
        self.lm_head = nn.Linear(64, 96, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.mix(x)  # [b, 3 * s, d]
        s = x.shape[1] // 3
        main, streams = hidden[:, :s], hidden[:, s:]
        ngram = streams.view(x.shape[0], 2, s, -1)
        return self.lm_head(main), self.lm_head(ngram)


def test_same_results_as_stock_on_the_cpu_and_same_state() -> None:
    torch.manual_seed(0)
    stock = _NgramStreams()
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    x = torch.randn(2, 21, 64)
    with spyre_sim.use_stack("2026.05"), torch.no_grad():
        for ours, theirs in zip(adapted(x), stock(x), strict=True):
            assert ours.shape == theirs.shape
            torch.testing.assert_close(ours, theirs)
    assert adapted.state_dict().keys() == stock.state_dict().keys()


def test_rollback_restores_the_model_exactly() -> None:
    model = _NgramStreams()
    x = torch.randn(2, 21, 64)
    assert_rollback_exact(adapter, model, lambda m: torch.cat([o.flatten() for o in m(x)]))


def test_no_mode_where_the_release_reads_offset_views_right() -> None:
    model = _NgramStreams()
    apply(adapter, model)
    x = torch.randn(2, 6, 64)
    right = modes_in(model, model.lm_head, "2026.09", x)
    assert not {PackedCutsMode, ExactPackedPicksMode} & right
    assert PackedCutsMode in modes_in(model, model.lm_head, "2026.05", x)


@pytest.mark.parametrize(
    ("drawn", "release"),
    [
        (PROPHETNET, "2026.05"),
        (PROPHETNET, "2026.06"),
        (HIERA, "2026.05"),
        (DEEPSEEK_V2, "2026.05"),
        (WAV2VEC2_CONFORMER, "2026.05"),
    ],
    ids=[
        "prophetnet-2026.05",
        "prophetnet-2026.06",
        "hiera-2026.05",
        "deepseek_v2-2026.05",
        "wav2vec2_conformer-2026.05",
    ],
)  # (ProphetNet at 2026.07 and 2026.08 stops at other miscompiles: fp32-reduce-rows, mem-pool)
def test_drawn_cases_match_on_the_device(
    spyre: ModuleType, drawn: dict[str, Any], release: str
) -> None:
    case = Case.from_json(drawn)
    run = run_case(case, build_case(case), release)
    assert run.outcome is Outcome.MATCH, run.detail
    assert "fused-projection-split 2.3.0" in run.adapters
    assert "offset-view-input" not in run.miscompiles


@pytest.mark.parametrize("stack", ["2026.05", "2026.08"])  # offset views misread
@pytest.mark.parametrize("family", sorted(_BUILD))
def test_the_device_gives_2_2_0s_results_bit_for_bit(family: str, stack: str) -> None:
    """Where 2.2.0 left no view that starts inside a row, 2.3.0 computes nothing else."""
    renames = {"fused-projection-split 2.2.0": "fused-projection-split 2.3.0"}
    older = _upto({"fused-projection-split": Version("2.2.0")})
    assert_bit_identical(family, stack, (older, None), renames)


def test_integer_cuts_inside_a_row_are_taken_on_the_host(spyre: ModuleType) -> None:
    """The causal-LM loss's ``labels[..., 1:].contiguous()``: token ids above DL16's exact
    integers, cut inside each row; the device's copy reads each row from its start."""
    labels = (torch.arange(3 * 9).view(3, 9) * 997).int()  # ids up to 25922, int32 stored
    on_device = labels.to("spyre")
    with spyre.use_stack("2026.06"):  # offset-slice closed, offset-view-input miscompiled
        misread = on_device[..., 1:].contiguous().cpu()
    assert not torch.equal(misread, labels[..., 1:])  # what the mode avoids
    for release in ("2026.05", "2026.06"):  # at 2026.05 the device refuses the cut itself
        with spyre.use_stack(release), PackedCutsMode():
            shifted = on_device[..., 1:].contiguous()
            first, rest = on_device.split([2, 7], dim=-1)
            rows = on_device.narrow(0, 1, 2).contiguous()
            assert torch.equal(shifted.cpu(), labels[..., 1:])
            assert torch.equal(rest.contiguous().cpu(), labels[..., 2:])
            assert torch.equal(first.cpu(), labels[..., :2])
            assert torch.equal(rows.cpu(), labels[1:3])


@pytest.mark.parametrize("release", ["2026.05", "2026.06"])
def test_writes_into_an_integer_cut_reach_the_buffer(spyre: ModuleType, release: str) -> None:
    labels = torch.arange(3 * 9, dtype=torch.int32).view(3, 9)
    on_device = labels.to("spyre")
    with spyre.use_stack(release), PackedCutsMode():
        tail = on_device[..., 4:]
        tail.fill_(-100)
    expected = labels.clone()
    expected[..., 4:] = -100
    assert torch.equal(on_device.cpu(), expected)


class _PaddingMask(nn.Module):
    """Transformers' ``padding_mask_function``: a bool mask indexed by device index tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(mask.shape[0], device=x.device).view(-1, 1, 1, 1)
        keys = torch.arange(mask.shape[1], device=x.device).view(1, 1, 1, -1)
        picked = mask[rows, keys].squeeze(1).squeeze(1).unsqueeze(-1)
        out: torch.Tensor = self.proj(x) * picked.to(x.dtype)
        return out


@pytest.mark.parametrize("release", ["2026.05", "2026.06"])
def test_advanced_indexing_of_an_integer_tensor_is_left_to_the_bridges(
    spyre: ModuleType, release: str
) -> None:
    """BERT's mask ``padding_mask[batch, None, None, kv]`` indexes a bool tensor with device
    tensors: a copy, never a view, so the integer path leaves it to the bridges. The first
    draft took the cut's position on a meta tensor indexed by the device tensors, which the
    device refused before any bridge saw it (``indirect-access``: every SMOKE test of BERT and
    RoBERTa that builds a padding mask, at 2026.05)."""
    import spyre_adapters

    torch.manual_seed(0)
    model = _PaddingMask()
    x, mask = torch.randn(3, 7, 64), torch.rand(3, 7) > 0.3
    expected = model(x, mask)
    with spyre.use_stack(release), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's fallback and downcast notices
        on_device = model.to("spyre")
        spyre_adapters.prepare(on_device, stack=release)
        out = on_device(x.to("spyre"), mask.to("spyre")).cpu()
    torch.testing.assert_close(out.float(), expected, atol=1e-2, rtol=1e-2)
