"""layernorm-two-pass 1.1.0 and 2.1.0: also the nn.LayerNorm subclasses whose forward permutes
around the stock one (ConvNeXt's channels_first LayerNorm), which 1.0.2 and 2.0.1 leave to the
fused kernel and its NaN on near-constant rows. What they share with 1.0.2 and 2.0.1 (every
family of the manifest against the stock model, any input layout, rollback) is tested with
those, in tests/library/test_layer_norm_stats_uncopied.py."""

from __future__ import annotations

import copy
import warnings
from types import ModuleType

import pytest
import torch
from library_models import (
    apply,
    assert_rollback_exact,
)
from torch import nn

from spyre_adapters.library.layer_norm_stats_uncopied import fp32_statistics as adapter_2_0_1
from spyre_adapters.library.layer_norm_subclasses import (
    TwoPassLayerNormMode,
    fp32_statistics,
    input_dtype,
)

VERSIONS = [pytest.param(input_dtype, id="1.1.0"), pytest.param(fp32_statistics, id="2.1.0")]


class ChannelsFirstLayerNorm(nn.LayerNorm):
    """ConvNeXt's pattern: normalise the channels of ``[b, c, h, w]`` through the stock
    forward, by permuting to channels-last and back."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        features = features.permute(0, 2, 3, 1)
        features = super().forward(features)
        return features.permute(0, 3, 1, 2)


def _stage(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    stage = nn.Sequential(nn.Conv2d(3, 10, 2, stride=2), ChannelsFirstLayerNorm(10, eps=1e-6))
    with torch.no_grad():
        stage[1].weight.uniform_(0.5, 1.5)
        stage[1].bias.uniform_(-0.5, 0.5)
    return stage


@pytest.mark.parametrize("adapter", VERSIONS)
def test_a_channels_first_subclass_gives_the_stock_numbers_on_the_cpu(adapter: object) -> None:
    stock, adapted = _stage(), _stage()
    assert not adapter_2_0_1.matches(adapted)  # what 2.0.1 left to the fused kernel
    assert adapter.matches(adapted)  # type: ignore[attr-defined]
    apply(adapter, adapted)  # type: ignore[arg-type]
    assert "forward" in adapted[1].__dict__
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        ref, out = stock(x), adapted(x)
    assert out.shape == ref.shape == (2, 10, 4, 4)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert adapted.state_dict().keys() == stock.state_dict().keys()
    assert type(adapted[1]) is ChannelsFirstLayerNorm


def test_convnext_backbone_matches_stock_and_rolls_back() -> None:
    from transformers import ConvNextBackbone, ConvNextConfig

    config = ConvNextConfig(
        num_channels=3,
        hidden_sizes=[10, 20, 30, 40],
        depths=[2, 2, 3, 2],
        image_size=32,
        out_features=["stage2", "stage3", "stage4"],
    )
    torch.manual_seed(0)
    stock = ConvNextBackbone(config).eval()
    adapted = ConvNextBackbone(config).eval()
    adapted.load_state_dict(stock.state_dict())
    apply(fp32_statistics, adapted)
    channels_first = [
        m for m in adapted.modules() if getattr(m, "data_format", None) == "channels_first"
    ]
    assert channels_first
    assert all("forward" in m.__dict__ for m in channels_first)
    pixels = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref, out = stock(pixels).feature_maps, adapted(pixels).feature_maps
    for a, b in zip(out, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert_rollback_exact(fp32_statistics, stock, lambda m: m(pixels).feature_maps[-1])


def test_the_mode_normalises_every_dim_of_the_normalised_shape() -> None:
    x = torch.randn(2, 3, 4, 5)
    weight, bias = torch.rand(4, 5) + 0.5, torch.randn(4, 5)
    ref = torch.nn.functional.layer_norm(x, (4, 5), weight, bias, eps=1e-5)
    for fp32 in (False, True):
        with TwoPassLayerNormMode(fp32=fp32):
            out = torch.nn.functional.layer_norm(x, (4, 5), weight, bias, eps=1e-5)
            other = torch.add(x, 1)  # other calls run as they are
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        assert torch.equal(other, x + 1)


@pytest.mark.parametrize(
    ("adapter", "release"), [(input_dtype, "2026.05"), (fp32_statistics, "2026.09")]
)
def test_near_constant_channels_stay_finite_on_the_device(
    spyre: ModuleType, adapter: object, release: str
) -> None:
    """The stock subclass hits the fused kernel's NaN on near-constant pixels (every channel
    almost equal); adapted, the result is finite (how close it can be to the CPU's is the
    input's conditioning, not the adapter's: the deviations are near DL16's resolution), and
    on ordinary pixels it is the CPU's within DL16's precision."""
    stock = _stage()[1].half()
    pixels = torch.randn(1, 1, 4, 4)
    flat = (pixels + torch.linspace(0.0, 1e-3, 10).view(1, 10, 1, 1)).half()  # variance ~1e-7
    ordinary = torch.randn(1, 10, 4, 4, dtype=torch.float16)
    with torch.no_grad():  # the CPU on the values the device stores (DL16)
        ref = copy.deepcopy(stock).float()(spyre.round_to_dl16(ordinary).float())
    adapted = copy.deepcopy(stock)
    apply(adapter, adapted)  # type: ignore[arg-type]
    with spyre.use_stack(release), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", spyre.SpyreDowncastWarning)  # 2.1.0's fp32 statistics
        wrong = stock.to("spyre")(flat.to("spyre")).cpu()
        out = adapted.to("spyre")(flat.to("spyre")).cpu()
        right = adapted(ordinary.to("spyre")).cpu()
    assert torch.isnan(wrong).all()
    assert torch.isfinite(out).all()
    torch.testing.assert_close(right.float(), ref, rtol=2e-2, atol=2e-2)
