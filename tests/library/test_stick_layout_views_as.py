"""head-padding 2.7.0 and stick-align-padding 2.3: 2.6.0's and 2.2's rewrites in the chain
``stick-layout-chain-2``, whose first link computes ``view_as`` / ``reshape_as`` as ``view`` /
``reshape``. A head split written with them (Beam's attention gate) stops 2.6.0 at
``sub-stick-head`` and runs with 2.7.0, matching the CPU; every model 2.6.0 runs gives the
same device results bit for bit; on the CPU the adapted model is the stock one; rollback is
exact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
from library_models import apply, assert_stops_then_runs
from packaging.version import Version
from test_stick_layout_chain import (
    _BUILD,
    _llama,
    _upto,
    assert_bit_identical,
    assert_same_greedy_decoding,
    assert_stock_on_the_cpu_and_exact_rollback,
)
from torch import nn

from spyre_adapters.library import _stick_layout_chain_v2, _stick_layout_views_as
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.stick_align_v2_2 import stick_align_padding as align_v2_2
from spyre_adapters.library.stick_align_v2_3 import stick_align_padding
from spyre_adapters.library.stick_layout_v2_6_0 import head_padding as v2_6
from spyre_adapters.library.stick_layout_v2_7_0 import head_padding

_V2_6 = {"head-padding": Version("2.6.0"), "stick-align-padding": Version("2.2.0")}
#: 2.7.0 and 2.3 the newest (later versions are tested against these in their own files)
_V2_7 = {"head-padding": Version("2.7.0"), "stick-align-padding": Version("2.3.0")}


class GatedAttentionOutput(nn.Module):
    """Beam's attention gate: a projection split into heads of 8 with ``view_as``/``reshape_as``
    the attention output's shape, scaled per head, merged and projected back."""

    def __init__(self, written_as: str = "view_as") -> None:
        super().__init__()
        self.gate = nn.Linear(64, 40)
        self.bias = nn.Parameter(torch.linspace(-1.0, 1.0, 5))
        self.out = nn.Linear(40, 64)
        self.written_as = written_as

    def forward(self, hidden: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        gate = self.gate(hidden)
        split = gate.view_as(heads) if self.written_as == "view_as" else gate.reshape_as(heads)
        gated = torch.sigmoid(split + self.bias[None, None, :, None]) * heads
        return self.out(gated.flatten(-2))  # type: ignore[no-any-return]


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 9, 64, generator=generator)
    heads = torch.randn(2, 9, 5, 8, generator=generator)  # heads of 8: below a stick
    return hidden.to(device), heads.to(device)


def _gated(written_as: str) -> GatedAttentionOutput:
    torch.manual_seed(0)
    return GatedAttentionOutput(written_as).eval()


@pytest.mark.parametrize("written_as", ["view_as", "reshape_as"])
def test_a_head_split_written_as_view_as_runs_only_with_2_7_0(written_as: str) -> None:
    # align: the output projection's K of 40
    assert_stops_then_runs(lambda: _gated(written_as), _inputs, [v2_6, align_v2_2],
                           [head_padding, stick_align_padding], atol=2e-2)  # fmt: skip


@pytest.mark.parametrize("stack", ["2026.09", "2026.05"])
@pytest.mark.parametrize("family", sorted(_BUILD))
def test_the_device_gives_2_6_0s_results_bit_for_bit(family: str, stack: str) -> None:
    renames = {"head-padding 2.6.0": "head-padding 2.7.0",
               "stick-align-padding 2.2.0": "stick-align-padding 2.3.0"}  # fmt: skip
    assert_bit_identical(family, stack, (_upto(_V2_6), _upto(_V2_7)), renames)


def test_greedy_generation_on_the_device_is_2_6_0s() -> None:
    assert_same_greedy_decoding((_upto(_V2_6), _upto(_V2_7)))


@pytest.mark.parametrize("adapter", [head_padding, stick_align_padding], ids=["head", "align"])
def test_same_values_as_stock_on_the_cpu_and_rollback_is_exact(adapter: Any) -> None:
    assert_stock_on_the_cpu_and_exact_rollback(adapter, _stick_layout_chain_v2.KIND)


#: the modes of ``stick-layout-chain-2`` with both adapters' links, in call order
CHAIN_2_MODES = ["ViewsAs", "CutWritesUnwrapped", "IntegerSizes", "IntHeadSplit",
                 "IndexedCutWrites", "IndexedCuts", "StickFolds"]  # fmt: skip


def chained_modes(adapters: Sequence[Any], kind: str, factory: Any) -> list[str]:
    """The classes of the modes in the chain of ``kind`` (built by ``factory``) on a Llama
    adapted by ``adapters``, in call order."""
    model = _llama()
    for adapter in adapters:
        apply(adapter, model)
    chain = factory(enabled(model)[kind])
    return [type(m).__name__ for m in chain.modes]


def test_both_adapters_share_one_chain_with_views_as_first() -> None:
    modes = chained_modes(
        [head_padding, stick_align_padding],
        _stick_layout_chain_v2.KIND,
        _stick_layout_chain_v2._factory,
    )
    assert modes == CHAIN_2_MODES


def test_view_as_is_view_with_the_other_sizes() -> None:
    x, other = torch.arange(12.0), torch.empty(3, 4)
    with _stick_layout_views_as.ViewsAs():
        assert torch.equal(x.view_as(other), x.view(3, 4))
        assert torch.equal(x.reshape_as(other=other), x.reshape(3, 4))
        assert x.view_as(other)._base is x  # still a view of x
        with pytest.raises(RuntimeError):
            x.view_as(torch.empty(5))  # PyTorch's own error for a size that does not fit


def test_bad_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="not chainable"):
        _stick_layout_chain_v2.enable(nn.Linear(3, 3), None, ["stick-layout"], "sub-stick-head")
