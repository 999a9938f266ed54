from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from library_models import (
    _TINY_IMAGES,
    apply,
    assert_rollback_exact,
    families,
    randomize,
    registry_where,
    vision_model,
)
from packaging.version import Version
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.host_patch_mask import HostPatchMaskMode, adapter

FAMILIES = families("host-patch-mask")

# every family at 32x32 images: the 4x4 patch grid of _TINY_IMAGES is sub-stick in any case
_HIERARCHICAL: dict[str, dict[str, Any]] = {
    "swin": {"embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2], "window_size": 2},
    "swinv2": {"embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2], "window_size": 2},
    "focalnet": {"embed_dim": 16, "depths": [1, 1], "hidden_sizes": [16, 32]},
}


def masked_image_model(model_type: str, seed: int = 0, patch_size: int = 2) -> nn.Module:
    """A tiny ``...ForMaskedImageModeling`` whose reconstruction has the input's size."""
    from transformers import AutoConfig, AutoModelForMaskedImageModeling

    # the hierarchical families map num_attention_heads onto their per-stage num_heads
    base = _HIERARCHICAL.get(model_type)
    sizes: dict[str, Any] = {"image_size": 32} if base else dict(_TINY_IMAGES)
    sizes.update(base or {}, num_channels=3, patch_size=patch_size)
    config = AutoConfig.for_model(model_type, **sizes)
    # the loss needs reconstructed pixels of the input's size: the decoder's stride is the
    # total downsampling of the encoder (its patch size times its stage merges)
    stages = len(sizes.get("depths", [0]))
    config.encoder_stride = patch_size * 2 ** (stages - 1)
    torch.manual_seed(seed)
    model = AutoModelForMaskedImageModeling.from_config(config)
    return randomize(model, seed).eval()


def _inputs(model: nn.Module, seed: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    config = model.config
    patches = (config.image_size // config.patch_size) ** 2
    pixels = torch.randn(3, 3, config.image_size, config.image_size, generator=gen)
    return pixels, torch.randint(0, 2, (3, patches), generator=gen)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_loss_and_reconstruction_as_stock_on_the_cpu(model_type: str) -> None:
    stock, adapted = masked_image_model(model_type), masked_image_model(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert not adapter.matches(adapted), "an adapted model must not match again"
    pixels, mask = _inputs(stock)
    with torch.no_grad():
        ref = stock(pixels, bool_masked_pos=mask)
        out = adapted(pixels, bool_masked_pos=mask)
        plain = adapted(pixels)  # no mask: the stock forward, no loss
    assert ref.loss is not None
    assert out.loss is not None
    assert torch.equal(out.loss, ref.loss)
    assert torch.equal(out.reconstruction, ref.reconstruction)
    assert plain.loss is None
    assert list(out.keys()) == list(ref.keys())


def test_tuple_outputs_keep_the_loss_first() -> None:
    stock, adapted = masked_image_model("vit"), masked_image_model("vit")
    apply(adapter, adapted)
    pixels, mask = _inputs(stock)
    with torch.no_grad():
        ref = stock(pixels, bool_masked_pos=mask, return_dict=False)
        out = adapted(pixels, mask, return_dict=False)  # the mask passed by position
    assert len(out) == len(ref)
    for a, b in zip(out, ref, strict=True):
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")  # the loss is fp32
@pytest.mark.parametrize("model_type", ["vit", "swin"])
def test_runs_on_the_device_where_the_stock_model_fails(model_type: str) -> None:
    stock = masked_image_model(model_type)
    pixels, mask = _inputs(stock)
    with torch.no_grad():
        ref = stock(pixels, bool_masked_pos=mask)
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        half = pixels.half().to("spyre")
        # every other adapter resolved at 2026.09 but head-padding from 2.2.0 on, which takes
        # integer splits to the host on its own: the mask's grid reshape still stops it
        without = registry_where(
            lambda m: (
                m.name != adapter.name
                and not (m.name == "head-padding" and m.version >= Version("2.2.0"))
            )
        )
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=without)
        with pytest.raises(spyre_sim.SpyreLayoutError, match="sub-stick-head"):
            plain.half().to("spyre")(half, bool_masked_pos=mask.int().to("spyre"))

        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        assert "host-patch-mask" in {a.name for a in spyre_adapters.applied(adapted)}
        out = adapted.half().to("spyre")(half, bool_masked_pos=mask.int().to("spyre"))
        loss = out.loss.cpu().float()
        recon = out.reconstruction.cpu().float()
    assert torch.allclose(loss, ref.loss, rtol=2e-2)
    cos = torch.nn.functional.cosine_similarity(recon.flatten(), ref.reconstruction.flatten(), 0)
    assert cos > 0.99


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")  # the sum is int64
def test_the_mode_hosts_only_the_mask_and_what_is_derived_from_it() -> None:
    hosted: list[str] = []

    class Spy(HostPatchMaskMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):  # type: ignore[no-untyped-def]
            before = len(self._lineage)
            result = super().__torch_function__(func, types, args, kwargs)
            if len(self._lineage) > before:
                hosted.append(getattr(func, "__name__", str(func)))
            return result

    with spyre_sim.use_stack("2026.09"):
        mask = torch.tensor([[1, 0, 0, 1] * 16], dtype=torch.int32).to("spyre")
        other = torch.tensor([[1, 2, 3, 4] * 16], dtype=torch.int32).to("spyre")
        floats = torch.ones(1, 64, dtype=torch.float16).to("spyre")
        with Spy(mask):
            grid = mask.reshape(-1, 8, 8)  # hosted: on the device a sub-stick split
            total = grid.sum()  # hosted: derived from the mask alone
            shifted = mask + 1  # hosted (as Tensor.add): an operator is no write
            mixed = floats * mask  # passes through: a float operand
            unrelated = other.reshape(-1, 2)  # passes through: not the mask
            grid.add_(1)  # in place: passes through, the write must reach grid
            grid += 1  # so does an augmented assignment
    assert hosted == ["reshape", "sum", "add"]
    assert grid.device.type == "spyre"
    assert total.device.type == "spyre"
    assert torch.equal(grid.cpu(), torch.tensor([[1, 0, 0, 1] * 16]).reshape(-1, 8, 8) + 2)
    assert torch.equal(shifted.cpu(), torch.tensor([[2, 1, 1, 2] * 16], dtype=torch.int32))
    assert int(total.cpu()) == 32
    assert mixed.device.type == "spyre"
    assert unrelated.shape == (32, 2)


def test_rollback_restores_the_model_exactly() -> None:
    model = masked_image_model("vit")
    pixels, mask = _inputs(model)

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(pixels, bool_masked_pos=mask).loss  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, model, probe)


def test_does_not_match_models_without_the_mask_expansion() -> None:
    assert not adapter.matches(vision_model("vit"))  # takes bool_masked_pos, never expands it
    from transformers import AutoConfig, AutoModelForImageClassification

    config = AutoConfig.for_model("vit", **_TINY_IMAGES, num_channels=3)
    assert not adapter.matches(AutoModelForImageClassification.from_config(config))
