"""fp32-row-sums 1.0.0: last-dim sums and means of more than 32 rows computed as a product with
a column of ones while the release miscompiles fp32 reductions over more than 32 rows. The
stock values (fp32 rounding apart) for every call form and dtype; other calls untouched; a
model adapted gives the stock outputs and state on the CPU; on the device the Mamba and
RoBERTa configurations the differential campaign drew, whose norms hit the miscompile at
2026.07, match the CPU."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, modes_in
from torch import nn

import spyre_sim
from spyre_adapters.enablement.differential import Case, Outcome, build_case, run_case
from spyre_adapters.library.fp32_row_sums import ROWS, Fp32RowSumsMode, adapter, row_sum

#: drawn by the differential campaign (seed 20261207): ``residual_in_fp32`` feeds the last
#: RMSNorm an fp32 stream of 64 rows, which ``rms-norm`` 1.1.0 reduces "at the input dtype"
MAMBA = {
    "family": "mamba",
    "sizes": {"name": "drawn", "hidden": 128, "heads": 4, "head_dim": 32, "kv_heads": 1,
              "intermediate": 128, "layers": 1, "vocab": 256, "experts": 4,
              "experts_per_token": 2, "image_size": 32, "patch_size": 8,
              "audio_positions": 32, "seq_len": 64, "batch": 1},
    "features": {"partial_rotary": 0.25, "tie_embeddings": False, "sliding_window": 4},
    "attention": None, "padding": "none", "seed": 52410, "decode": True,
}  # fmt: skip
#: the same campaign: ``layernorm-two-pass`` 2.1.0's fp32 statistics over 3 x 31 rows
ROBERTA = {
    "family": "roberta",
    "sizes": {"name": "drawn", "hidden": 16, "heads": 1, "head_dim": 16, "kv_heads": 1,
              "intermediate": 200, "layers": 2, "vocab": 250, "experts": 4,
              "experts_per_token": 2, "image_size": 64, "patch_size": 16,
              "audio_positions": 32, "seq_len": 31, "batch": 3},
    "features": {"partial_rotary": None, "tie_embeddings": None, "sliding_window": 4},
    "attention": "eager", "padding": "none", "seed": 14690, "decode": False,
}  # fmt: skip

_CALLS: list[tuple[str, Any]] = [
    ("x.sum(-1)", lambda x: x.sum(-1)),
    ("x.mean(-1, keepdim=True)", lambda x: x.mean(-1, keepdim=True)),
    ("x.mean(dim=[-1])", lambda x: x.mean(dim=[-1])),
    ("torch.sum(x, 2)", lambda x: torch.sum(x, 2)),
    ("torch.mean(x, dim=(-1,), keepdim=True)", lambda x: torch.mean(x, dim=(-1,), keepdim=True)),
    ("x.sum(-1, dtype=float64)", lambda x: x.sum(-1, dtype=torch.float64)),
    ("x.mean(-1, True, dtype=float32)", lambda x: x.mean(-1, True, dtype=torch.float32)),
]


def _rows(dtype: torch.dtype, rows: int = 3 * 13, width: int = 40) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, rows // 3, width, generator=g) * 4).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(("text", "call"), _CALLS, ids=[t for t, _ in _CALLS])
def test_every_call_form_gives_the_stock_result(text: str, call: Any, dtype: torch.dtype) -> None:
    x = _rows(dtype)
    with spyre_sim.use_stack("2026.07"), Fp32RowSumsMode():
        ours = call(x)
    stock = call(x)
    assert ours.shape == stock.shape
    assert ours.dtype == stock.dtype
    # the same fp32 sum up to the order of its additions, then the stock call's rounding
    torch.testing.assert_close(ours, stock)


def test_infinities_and_nan_reach_the_sum_as_in_the_stock_reduction() -> None:
    x = _rows(torch.float32)
    x[0, 0, 3] = float("inf")
    x[1, 2, 0] = float("-inf")
    x[2, 5, 7] = float("nan")
    x[2, 6, 1], x[2, 6, 2] = float("inf"), float("-inf")
    with Fp32RowSumsMode():
        ours = x.sum(-1)
    stock = x.sum(-1)
    assert torch.equal(torch.isnan(ours), torch.isnan(stock))
    assert torch.equal(torch.isinf(ours), torch.isinf(stock))
    finite = torch.isfinite(stock)
    torch.testing.assert_close(ours[finite], stock[finite])
    assert torch.equal(ours[~finite].nan_to_num(0.0), stock[~finite].nan_to_num(0.0))


@pytest.fixture
def products(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shapes of the products the mode computes, recorded."""
    from spyre_adapters.library import fp32_row_sums

    seen: list[tuple[int, ...]] = []
    real = fp32_row_sums.row_sum

    def recorded(x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
        seen.append(tuple(x.shape))
        return real(x, keepdim)

    monkeypatch.setattr(fp32_row_sums, "row_sum", recorded)
    return seen


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.sum(0),  # not the last dim
        lambda x: x.mean(dim=(1, 2)),  # two dims
        lambda x: x.sum(),  # everything
        lambda x: x[:, :10].sum(-1),  # 30 rows: the release gets those right
        lambda x: x.long().sum(-1),  # integers
        lambda x: x.sum(-1, dtype=torch.int64),
        lambda x: torch.sum(x, -1, out=torch.empty(3, 13)),  # out=
    ],
    ids=["dim-0", "two-dims", "all", "30-rows", "int", "int-dtype", "out"],
)
def test_other_reductions_are_left_alone(call: Any, products: list[tuple[int, ...]]) -> None:
    x = _rows(torch.float32)
    with Fp32RowSumsMode():
        ours = call(x)
    assert products == []
    assert torch.equal(ours, call(x))


def test_more_than_32_rows_go_through_the_product(products: list[tuple[int, ...]]) -> None:
    with Fp32RowSumsMode():
        _rows(torch.float32, rows=ROWS + 1).mean(-1)
        _rows(torch.float16, rows=ROWS).sum(-1)  # 30 rows: left alone
    assert products == [(3, (ROWS + 1) // 3, 40)]


def test_row_sum_pads_the_reduction_dim_and_keeps_dims() -> None:
    x = _rows(torch.float32, width=37)
    torch.testing.assert_close(row_sum(x), x.sum(-1))
    assert row_sum(x, keepdim=True).shape == (3, 13, 1)


class _Norms(nn.Module):
    """An fp32 RMSNorm on an upcast stream and a LayerNorm written out in two passes."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x).float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        centred = h - h.mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt((centred * centred).mean(dim=-1, keepdim=True) + 1e-5)


def test_same_results_as_stock_on_the_cpu_and_same_state() -> None:
    torch.manual_seed(0)
    stock = _Norms()
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    x = torch.randn(2, 40, 64)
    with spyre_sim.use_stack("2026.07"), torch.no_grad():
        ours, theirs = adapted(x), stock(x)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs)
    assert adapted.state_dict().keys() == stock.state_dict().keys()


def test_rollback_restores_the_model_exactly() -> None:
    model = _Norms()
    x = torch.randn(2, 40, 64)
    assert_rollback_exact(adapter, model, lambda m: m(x))


@pytest.mark.parametrize(("release", "entered"), [("2026.07", True), ("2026.08", False)])
def test_the_mode_runs_only_where_the_release_miscompiles(release: str, entered: bool) -> None:
    model = _Norms()
    apply(adapter, model)
    seen = modes_in(model, model.proj, release, torch.randn(2, 40, 64))
    assert (Fp32RowSumsMode in seen) is entered


@pytest.mark.parametrize("drawn", [MAMBA, ROBERTA], ids=["mamba", "roberta"])
def test_drawn_cases_match_on_the_device_at_2026_07(
    spyre: ModuleType, drawn: dict[str, Any]
) -> None:
    case = Case.from_json(drawn)
    run = run_case(case, build_case(case), "2026.07")
    assert run.outcome is Outcome.MATCH, run.detail
    assert "fp32-row-sums 1.1.0" in run.adapters  # the version resolution picks
    assert "fp32-reduce-rows" not in run.miscompiles
