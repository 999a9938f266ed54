"""fp32-row-sums 1.1.0: means of more than 32 rows as a product with a column of ``2**-k``,
so that the stored product never exceeds the largest input (1.0.0 stored the whole sum, which
for a norm's sum of squares can pass DL16's largest number where the mean does not). The stock
values on the CPU for every mean form and dtype, the same model state, an exact rollback, and
on the device at 2026.07 the mean of rows whose sum of squares overflows DL16."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, modes_in
from torch import nn

import spyre_sim
from spyre_adapters.library.fp32_row_sums import Fp32RowSumsMode
from spyre_adapters.library.fp32_row_sums_v1_1_0 import Fp32RowMeansMode, adapter, row_mean

_MEANS: list[tuple[str, Any]] = [
    ("x.mean(-1)", lambda x: x.mean(-1)),
    ("x.mean(-1, keepdim=True)", lambda x: x.mean(-1, keepdim=True)),
    ("torch.mean(x, dim=(-1,), keepdim=True)", lambda x: torch.mean(x, dim=(-1,), keepdim=True)),
    ("x.mean(-1, True, dtype=float32)", lambda x: x.mean(-1, True, dtype=torch.float32)),
    ("x.sum(-1)", lambda x: x.sum(-1)),
]


@pytest.mark.parametrize("width", [40, 64, 100, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize(("text", "call"), _MEANS, ids=[t for t, _ in _MEANS])
def test_every_form_gives_the_stock_result(
    text: str, call: Any, dtype: torch.dtype, width: int
) -> None:
    x = (torch.randn(3, 13, width, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    expected = call(x)
    with Fp32RowMeansMode():
        got = call(x)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if dtype == torch.float32:  # the order of fp32 additions apart (1000 terms: 5e-6)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)
    else:
        torch.testing.assert_close(got, expected)


def test_the_stored_product_is_the_mean_scale_not_the_sum() -> None:
    x = torch.full((40, 100), 3.0)
    assert torch.equal(row_mean(x), torch.full((40,), 3.0))
    # what the device stores before the last division: the sum over 2**7, at most max |x|
    assert float((x @ torch.full((100, 1), 2.0**-7)).max()) <= float(x.abs().max())


class _Norm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.weight = nn.Parameter(torch.ones(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x).float()
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def test_same_results_as_stock_on_the_cpu_same_state_exact_rollback() -> None:
    stock, adapted, x = _Norm(), _Norm(), torch.randn(2, 40, 64)
    adapted.load_state_dict(stock.state_dict())
    apply(adapter, adapted)
    with spyre_sim.use_stack("2026.07"), torch.no_grad():
        torch.testing.assert_close(adapted(x), stock(x))  # 40 x 2 rows: the mode is entered
    assert adapted.state_dict().keys() == stock.state_dict().keys()
    assert_rollback_exact(adapter, _Norm(), lambda m: m(x))


@pytest.mark.parametrize(("release", "entered"), [("2026.07", True), ("2026.08", False)])
def test_the_mode_runs_only_where_the_release_miscompiles(release: str, entered: bool) -> None:
    model = _Norm()
    apply(adapter, model)
    assert (Fp32RowMeansMode in modes_in(model, model.proj, release, torch.randn(2, 40, 64))) is (
        entered
    )


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")  # the modes' fp32 upcast
@pytest.mark.parametrize(("mode", "right"), [(Fp32RowSumsMode, False), (Fp32RowMeansMode, True)])
def test_a_mean_square_whose_sum_overflows_dl16_on_the_device(
    spyre: ModuleType, mode: type, right: bool
) -> None:
    """CPMAnt's residual stream at realistic sizes: values up to 7.3e4, a row's sum of squares
    1.0e11, beyond DL16's largest number (about 8.6e9); its mean, 4e8, is not. 1.0.0 stored the
    sum (cosine 0.76 for CPMAnt's logits at 2026.07), 1.1.0 matches."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(40, 256, generator=g) * 2.0e4).clamp(-6.0e4, 6.0e4).half()
    expected = x.float().pow(2).mean(-1, keepdim=True)
    assert float(x.float().pow(2).sum(-1).max()) > 8.6e9  # the sums pass DL16's largest number

    class MeanSquare(nn.Module):  # a model forward: the device's numbers, not the harness's
        def forward(self, h: torch.Tensor) -> torch.Tensor:
            h = h.float()  # CPMAnt's norm upcasts, then squares (integer-pow: a product)
            with mode():
                return (h * h).mean(-1, keepdim=True)

    with spyre_sim.use_stack("2026.07"):
        got = MeanSquare()(x.to("spyre")).float().cpu()
    close = torch.allclose(got, expected, rtol=4e-3)
    assert close is right, (got[:3].flatten(), expected[:3].flatten())
