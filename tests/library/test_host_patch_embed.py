"""host-patch-embed, every version: the stock numbers, the modules it leaves alone, an exact
rollback; what 1.1.0 changes: the weights the module holds at each call, and a patch that does
not depend on the batch it comes in (sums in float64)."""

from __future__ import annotations

import copy
import warnings
from types import ModuleType

import pytest
import torch
from library_models import (
    PIXELS,
    adapted_pair,
    apply,
    assert_rollback_exact,
    causal_lm,
    cosine,
    every_version,
    families,
    last_hidden,
    vision_model,
)

import spyre_adapters
from spyre_adapters.contract import Adapter
from spyre_adapters.library.host_patch_embed import adapter as adapter_1_0_0
from spyre_adapters.library.host_patch_embed_v1_1_0 import adapter
from spyre_sim.numerics import round_wide_to_dl16

VERSIONS: dict[str, Adapter] = every_version("host-patch-embed")
CASES = [(v, t) for v in VERSIONS for t in families("host-patch-embed", v)]


@pytest.mark.parametrize(("version", "model_type"), CASES)
def test_same_hidden_states_as_stock(version: str, model_type: str) -> None:
    stock, adapted = adapted_pair(VERSIONS[version], vision_model, model_type)
    ref = last_hidden(stock, pixel_values=PIXELS)
    out = last_hidden(adapted, pixel_values=PIXELS)
    assert cosine(out, ref) >= 0.9999
    assert torch.allclose(out, ref, atol=1e-5)


def test_1_0_0_convolves_with_the_host_copy_of_the_weights() -> None:
    model = vision_model("vit")
    conv = model.embeddings.patch_embeddings.projection
    apply(adapter_1_0_0, model)
    host = conv.spyre_host_weight
    assert host.device.type == "cpu"
    assert host.data_ptr() != conv.weight.data_ptr()  # a copy taken at prepare time
    with torch.no_grad():
        host.zero_()
        if conv.spyre_host_bias is not None:
            conv.spyre_host_bias.zero_()
        out = conv(PIXELS)
    assert torch.count_nonzero(out) == 0  # the forward really convolved with the host copy


@pytest.mark.parametrize("version", list(VERSIONS))
def test_overlapping_convolutions_are_left_alone(version: str) -> None:
    overlapping = torch.nn.Sequential(torch.nn.Conv2d(3, 8, kernel_size=3, stride=1))
    assert not VERSIONS[version].matches(overlapping)
    assert not VERSIONS[version].matches(causal_lm("llama"))


@pytest.mark.parametrize("version", list(VERSIONS))
def test_rollback_restores_the_model_exactly(version: str) -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        return last_hidden(m, pixel_values=PIXELS)

    model = vision_model("vit")
    assert_rollback_exact(VERSIONS[version], model, probe)
    conv = model.embeddings.patch_embeddings.projection
    assert not hasattr(conv, "spyre_host_weight")
    assert "forward" not in conv.__dict__


def _other_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    state = copy.deepcopy(model.state_dict())
    generator = torch.Generator().manual_seed(7)
    for tensor in state.values():
        if tensor.is_floating_point():
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.2)
    return state


@pytest.mark.parametrize(("version", "uses_them"), [(adapter_1_0_0, False), (adapter, True)])
def test_weights_loaded_after_apply_reach_the_patches(version: object, uses_them: bool) -> None:
    """What 1.1.0 fixes: 1.0.0 convolved with the weights of prepare time."""
    stock, adapted = vision_model("vit"), vision_model("vit")
    apply(version, adapted)  # type: ignore[arg-type]
    state = _other_weights(stock)
    stock.load_state_dict(state)
    adapted.load_state_dict(state)
    ref = last_hidden(stock, pixel_values=PIXELS)
    out = last_hidden(adapted, pixel_values=PIXELS)
    assert torch.allclose(out, ref, atol=1e-5) is uses_them


def _dl16(values: torch.Tensor) -> torch.Tensor:
    """float32 values the device can hold (DL16)."""
    return round_wide_to_dl16(values.detach()).float()


def _dl16_conv(out_channels: int = 32, patch: int = 2) -> torch.nn.Conv2d:
    conv = torch.nn.Conv2d(3, out_channels, kernel_size=patch, stride=patch)
    with torch.no_grad():
        conv.weight.copy_(_dl16(conv.weight))
        conv.bias.copy_(_dl16(conv.bias))
    return conv


@pytest.mark.parametrize("patch", [2, 16])
def test_a_patch_does_not_depend_on_its_batch(patch: int) -> None:
    """DL16 pixels and weights, as on the device: each image of a batch of 13 gives exactly the
    patches it gives alone (1.0.0's fp32 sums did not, on this machine in 30 of 30 draws)."""
    torch.manual_seed(0)
    holder = torch.nn.Sequential(_dl16_conv(patch=patch))
    apply(adapter, holder)
    for _ in range(10):
        images = _dl16(torch.rand(13, 3, 8 * patch, 8 * patch))
        with torch.no_grad():
            batched = _dl16(holder(images))
            alone = [_dl16(holder(images[i : i + 1])) for i in (0, 5, 12)]
        for row, single in zip((0, 5, 12), alone, strict=True):
            assert torch.equal(batched[row : row + 1], single)


def test_a_batch_gives_each_image_its_own_hidden_states_on_the_device(spyre: ModuleType) -> None:
    """Transformers' batching-equivalence check of ViT at 2026.05, where the patch embedding
    runs on the host: the first image's patches and hidden states in a batch of 13 and alone,
    identical."""
    model = vision_model("vit", image_size=30, patch_size=2, hidden_size=32,
                         num_attention_heads=4, intermediate_size=37,
                         initializer_range=0.02)  # Transformers' ViT tester  # fmt: skip
    prepared = spyre_adapters.prepare(model, "2026.05")
    assert "host-patch-embed 1.1.0" in [f"{a.name} {a.version}" for a in prepared.applied]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", spyre.SpyreDowncastWarning)
        model = model.to("spyre")
        for seed in range(3):  # 1.0.0's fp32 sums: a batch-dependent patch in 5 of 6 draws
            images = torch.rand(13, 3, 30, 30, generator=torch.Generator().manual_seed(seed))
            with spyre.use_stack("2026.05"), torch.no_grad():
                on_device = images.to("spyre")
                patches = model.embeddings.patch_embeddings.projection
                assert torch.equal(patches(on_device)[:1].cpu(), patches(on_device[:1]).cpu())
                batched = model(pixel_values=on_device, output_hidden_states=True).hidden_states
                alone = model(pixel_values=on_device[:1], output_hidden_states=True).hidden_states
            for layer, (many, one) in enumerate(zip(batched, alone, strict=True)):
                assert torch.equal(many[:1].cpu(), one.cpu()), f"draw {seed}, hidden state {layer}"
