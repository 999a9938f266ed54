"""head-padding 2.1: writes into a cut that head-padding computes as a copy reach the tensor it
was cut from, as they do into the stock view (2.0 lost them: a silent wrong answer)."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, causal_lm

import spyre_adapters
import spyre_sim
from spyre_adapters import default_registry
from spyre_adapters.library.stick_layout import head_padding as head_padding_2_0
from spyre_adapters.library.stick_layout_v2_1 import head_padding as head_padding_2_1_0
from spyre_adapters.library.stick_layout_v2_1_1 import head_padding

VERSIONS = pytest.mark.parametrize(
    "adapter", [head_padding_2_1_0, head_padding], ids=["2.1.0", "2.1.1"]
)

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])


class AssembledKeys(torch.nn.Module):
    """Keys assembled the way multi-head latent attention does: two halves copied into the
    columns of an empty tensor (DeepSeek-V2/V3, Youtu, GLM-4-MoE-Lite, MiniCPM3, ...)."""

    def forward(self, nope: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
        keys = nope.new_empty(*nope.shape[:-1], nope.shape[-1] + rot.shape[-1])
        keys[..., : nope.shape[-1]].copy_(nope)
        keys[..., nope.shape[-1] :].copy_(rot)
        scaled = keys[..., :8]
        scaled.mul_(2)  # an in-place op on a cut of a cut's source
        return keys


class AdvancedIndexCopy(torch.nn.Module):
    """``x[index_tensor]`` is a copy in PyTorch too: writing into it leaves ``x`` alone."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        picked = x[torch.tensor([0, 2])]
        picked.zero_()
        return x


def _stock(module: torch.nn.Module, *args: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return module(*[a.clone() for a in args])


class VmappedCuts(torch.nn.Module):
    """Cuts of the last dim under ``torch.vmap`` (FlexAttention builds its block mask so), one
    of them written into."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def row(r: torch.Tensor) -> torch.Tensor:
            r = r.clone()
            r[..., :8].mul_(2)
            return r[..., :8] + r[..., 8:]

        return torch.vmap(row)(x)


@VERSIONS
def test_writes_into_a_rewritten_cut_reach_its_source(adapter: object) -> None:
    nope, rot = torch.randn(2, 3, 16), torch.randn(2, 3, 16)
    expected = _stock(AssembledKeys(), nope, rot)
    lost = AssembledKeys()
    apply(head_padding_2_0, lost)
    assert not torch.equal(_stock(lost, nope, rot), expected)  # 2.0 wrote into copies
    kept = AssembledKeys()
    apply(adapter, kept)
    assert torch.equal(_stock(kept, nope, rot), expected)


@VERSIONS
def test_copies_of_the_stock_model_stay_copies(adapter: object) -> None:
    x = torch.randn(4, 32)
    module = AdvancedIndexCopy()
    apply(adapter, module)
    assert torch.equal(_stock(module, x), x)


def test_cuts_under_vmap() -> None:
    """2.1.0 asked a batched tensor for its storage and failed; 2.1.1 gives the stock values,
    the write into the cut included."""
    x = torch.randn(5, 3, 16)
    expected = _stock(VmappedCuts(), x)
    failing = VmappedCuts()
    apply(head_padding_2_1_0, failing)
    with pytest.raises(NotImplementedError, match="Cannot access storage of BatchedTensorImpl"):
        _stock(failing, x)
    module = VmappedCuts()
    apply(head_padding, module)
    assert torch.equal(_stock(module, x), expected)


@pytest.mark.parametrize("model_type", ["deepseek_v3", "youtu"])
def test_latent_attention_gives_the_stock_logits(model_type: str) -> None:
    sizes = {"qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16,
             "kv_lora_rank": 32, "q_lora_rank": None, "vocab_size": 99,
             "num_key_value_heads": 4}  # fmt: skip
    if model_type == "deepseek_v3":
        sizes |= {"n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 2,
                  "n_group": 1, "topk_group": 1}  # fmt: skip
    model = causal_lm(model_type, **sizes)
    with torch.no_grad():
        stock = model(input_ids=IDS).logits
    apply(head_padding, model)
    with torch.no_grad():
        adapted = model(input_ids=IDS).logits
    assert torch.allclose(adapted, stock, atol=1e-5, rtol=1e-4)
    prepared = causal_lm(model_type, **sizes)
    spyre_adapters.prepare(prepared, "2026.09")
    newest = max(m.version for m in default_registry().manifests() if m.name == "head-padding")
    assert ("head-padding", newest) in {
        (a.name, a.version) for a in spyre_adapters.applied(prepared)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        on_device = prepared.half().to("spyre")
        with spyre_sim.use_stack("2026.09"), torch.no_grad():
            out = on_device(input_ids=IDS.to("spyre")).logits.cpu().float()
    assert torch.isfinite(out).all()
    assert torch.nn.functional.cosine_similarity(out.flatten(), stock.flatten(), dim=0) > 0.99
