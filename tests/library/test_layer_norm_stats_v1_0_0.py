"""layernorm-two-pass 1.0.0, shipped again next to 1.0.1 and 2.0.0: different from 1.0.1 exactly
where 1.0.1 changed it (the output's strides). Its equivalence to the stock module and its
rollback: tests/library/test_layer_norm_stats.py, with every version."""

from __future__ import annotations

import torch
from library_models import apply

from spyre_adapters.library.layer_norm_stats_v1_0_0 import adapter


def test_keeps_a_permuted_layout_where_1_0_1_returns_a_contiguous_tensor() -> None:
    # The reason 1.0.1 exists: the same values, but the permuted strides of the input.
    stock, holder = (
        torch.nn.Sequential(torch.nn.LayerNorm(64)),
        torch.nn.Sequential(torch.nn.LayerNorm(64)),
    )
    holder.load_state_dict(stock.state_dict())
    apply(adapter, holder)
    x = torch.randn(2, 64, 16).permute(0, 2, 1)
    ref, out = stock(x), holder(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert ref.is_contiguous()
    assert not out.is_contiguous()
