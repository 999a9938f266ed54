from __future__ import annotations

import pytest
import torch
from library_models import (
    PIXELS,
    adapted_pair,
    apply,
    assert_rollback_exact,
    causal_lm,
    cosine,
    families,
    last_hidden,
    vision_model,
)

from spyre_adapters.library.host_patch_embed import adapter

FAMILIES = families("host-patch-embed")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_hidden_states_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(adapter, vision_model, model_type)
    ref = last_hidden(stock, pixel_values=PIXELS)
    out = last_hidden(adapted, pixel_values=PIXELS)
    assert cosine(out, ref) >= 0.9999
    assert torch.allclose(out, ref, atol=1e-5)


def test_convolution_uses_the_host_copy_of_the_weights() -> None:
    model = vision_model("vit")
    conv = model.embeddings.patch_embeddings.projection
    apply(adapter, model)
    host = conv.spyre_host_weight
    assert host.device.type == "cpu"
    assert host.data_ptr() != conv.weight.data_ptr()  # a copy taken at prepare time
    with torch.no_grad():
        host.zero_()
        if conv.spyre_host_bias is not None:
            conv.spyre_host_bias.zero_()
        out = conv(PIXELS)
    assert torch.count_nonzero(out) == 0  # the forward really convolved with the host copy


def test_overlapping_convolutions_are_left_alone() -> None:
    overlapping = torch.nn.Sequential(torch.nn.Conv2d(3, 8, kernel_size=3, stride=1))
    assert not adapter.matches(overlapping)
    assert not adapter.matches(causal_lm("llama"))


def test_rollback_restores_the_model_exactly() -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        return last_hidden(m, pixel_values=PIXELS)

    assert_rollback_exact(adapter, vision_model("vit"), probe)
    model = vision_model("vit")
    edit_conv = model.embeddings.patch_embeddings.projection
    assert not hasattr(edit_conv, "spyre_host_weight")
