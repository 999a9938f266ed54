"""layernorm-two-pass 1.0.2 and 2.0.1: the numbers of 1.0.1 and 2.0.0, without a copy of the
input. A LayerNorm of a token slice (``x[:, 1:]``, a view starting inside a row of its buffer)
must not become a copy the device miscompiles (offset-view-input, 2026.05 to 2026.08). Their
equivalence to the stock module and rollback: tests/library/test_layer_norm_stats.py."""

from __future__ import annotations

import copy
import warnings
from types import ModuleType

import pytest
import torch
from library_models import (
    apply,
    cosine,
)

from spyre_adapters.library.layer_norm_stats import adapter as adapter_1_0_1
from spyre_adapters.library.layer_norm_stats_uncopied import fp32_statistics as adapter_2_0_1
from spyre_adapters.library.layer_norm_stats_uncopied import input_dtype as adapter_1_0_2
from spyre_adapters.library.layer_norm_stats_v2_0_0 import adapter as adapter_2_0_0
from spyre_adapters.library.layer_norm_subclasses import fp32_statistics as adapter_2_1_0
from spyre_adapters.library.layer_norm_subclasses import input_dtype as adapter_1_1_0

#: each new version with the one whose numbers it keeps, and a release where it is resolved
VERSIONS = [
    pytest.param(adapter_1_0_2, adapter_1_0_1, "2026.05", id="1.0.2"),
    pytest.param(adapter_2_0_1, adapter_2_0_0, "2026.07", id="2.0.1"),
    # 1.1.0 and 2.1.0 edit what 1.0.2 and 2.0.1 match the same way (and subclasses besides:
    # tests/library/test_layer_norm_subclasses.py)
    pytest.param(adapter_1_1_0, adapter_1_0_1, "2026.05", id="1.1.0"),
    pytest.param(adapter_2_1_0, adapter_2_0_0, "2026.07", id="2.1.0"),
]


def _norm() -> torch.nn.Sequential:
    torch.manual_seed(0)
    holder = torch.nn.Sequential(torch.nn.LayerNorm(64))
    with torch.no_grad():
        holder[0].weight.normal_(1.0, 0.5)
        holder[0].bias.normal_(0.0, 0.5)
    return holder


@pytest.mark.parametrize(("adapter", "before", "release"), VERSIONS)
def test_the_numbers_of_the_version_before_for_any_layout(
    adapter: object, before: object, release: str
) -> None:
    stock = _norm()
    new, old = copy.deepcopy(stock), copy.deepcopy(stock)
    apply(adapter, new)  # type: ignore[arg-type]
    apply(before, old)  # type: ignore[arg-type]
    base = torch.randn(2, 9, 64)
    layouts = (base, base[:, 1:], base.permute(1, 0, 2))  # dense, an offset slice, permuted
    for x in layouts:
        torch.testing.assert_close(new(x), stock(x), rtol=1e-4, atol=1e-5)
    for dtype in (torch.float32, torch.float16):
        new, old = new.to(dtype), old.to(dtype)
        for x in layouts:
            ours, theirs = new(x.to(dtype)), old(x.to(dtype))
            assert ours.is_contiguous()
            assert torch.equal(ours, theirs)


@pytest.mark.parametrize(("adapter", "before", "release"), VERSIONS)
def test_a_token_slice_is_not_copied_on_the_device(
    spyre: ModuleType, adapter: object, before: object, release: str
) -> None:
    holder = _norm().half()
    previous = copy.deepcopy(holder)
    apply(adapter, holder)  # type: ignore[arg-type]
    apply(before, previous)  # type: ignore[arg-type]
    tokens = torch.randn(2, 9, 64, dtype=torch.float16)
    with torch.no_grad():
        expected = _norm().half()(tokens[:, 1:])
    holder, previous = holder.to("spyre"), previous.to("spyre")
    with spyre.use_stack(release), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", spyre.SpyreDowncastWarning)  # 2.0.1's fp32 statistics
        sliced = tokens.to("spyre")[:, 1:]  # starts inside a row of its buffer
        out = holder(sliced).cpu()
        assert "offset-view-input" not in spyre.telemetry.snapshot().to_json()["miscompiles"]
        previous(sliced)  # the version before copies the slice, and is miscompiled
        assert "offset-view-input" in spyre.telemetry.snapshot().to_json()["miscompiles"]
    assert cosine(out.float(), expected.float()) >= 0.999
