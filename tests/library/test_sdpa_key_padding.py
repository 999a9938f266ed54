"""sdpa-key-padding: keys padded to whole sticks and masked, so SDPA at a key length with a
partial last stick (miscompiled: gap ``sdpa-seq-align``) gives the stock numbers."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F
from transformers import ViTConfig, ViTModel

import spyre_adapters
import spyre_sim
from spyre_adapters.contract import ModelEdit
from spyre_adapters.library.sdpa_key_padding import STICK, adapter, pad_keys

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def _qkv(batch: int, heads: int, queries: int, keys: int, dim: int = 16) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(queries * 1000 + keys)
    return [torch.randn(batch, heads, n, dim, generator=g) for n in (queries, keys, keys)]


MASKS = ("none", "bool", "float", "bool-broadcast", "causal")


def _call(kind: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, object]:
    keys = k.shape[-2]
    g = torch.Generator().manual_seed(7)
    if kind == "bool":
        return {"attn_mask": torch.rand(q.shape[-2], keys, generator=g) > 0.3}
    if kind == "bool-broadcast":
        return {"attn_mask": (torch.rand(q.shape[0], 1, 1, keys, generator=g) > 0.2)}
    if kind == "float":
        mask = torch.zeros(q.shape[-2], keys)
        mask[:, keys // 3 :: 5] = torch.finfo(torch.float32).min
        return {"attn_mask": mask}
    if kind == "causal":
        return {"is_causal": True}
    return {}


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize(("queries", "keys"), [(65, 65), (1, 130), (7, 100), (70, 64), (5, 40)])
def test_padded_call_gives_the_stock_attention_on_the_cpu(
    kind: str, queries: int, keys: int
) -> None:
    if kind == "causal" and queries > keys:
        pytest.skip("top-left causal with more queries than keys: left as it is")
    q, k, v = _qkv(2, 3, queries, keys)
    kwargs = _call(kind, q, k, v)
    expected = F.scaled_dot_product_attention(q, k, v, **kwargs)  # type: ignore[arg-type]
    args, padded = pad_keys((q, k, v), dict(kwargs))
    got = F.scaled_dot_product_attention(*args, **padded)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    new_keys = args[1].shape[-2]
    if keys > STICK and keys % STICK:
        assert new_keys % STICK == 0
        assert new_keys > keys
    else:
        assert args[1] is k  # nothing to pad: the call is unchanged


def _vit() -> ViTModel:
    torch.manual_seed(0)
    cfg = ViTConfig(
        image_size=18, patch_size=2, num_channels=3, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=1, intermediate_size=128, attn_implementation="sdpa",
    )  # fmt: skip
    return ViTModel(cfg, add_pooling_layer=False).eval()


PIXELS = torch.randn(2, 3, 18, 18, generator=torch.Generator().manual_seed(1))


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a.flatten().float(), b.flatten().float(), dim=0))


def test_adapted_model_is_the_stock_model_on_the_cpu() -> None:
    stock = _vit()
    model = copy.deepcopy(stock)
    edit = ModelEdit(model)
    assert adapter.matches(model)
    adapter.apply(model, edit)
    with torch.no_grad():
        expected = stock(pixel_values=PIXELS).last_hidden_state
        got = model(pixel_values=PIXELS).last_hidden_state
    assert list(model.state_dict()) == list(stock.state_dict())
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert not adapter.matches(model)  # applied once


def _miscompiled(rec: spyre_sim.telemetry.Recording) -> set[str]:
    return set(rec.snapshot.miscompiles)


def test_vit_with_82_tokens_is_flagged_without_it_and_matches_with_it() -> None:
    """82 tokens (81 patches and CLS): one whole stick of keys and a partial one."""
    stock = _vit()
    with torch.no_grad():
        expected = stock(pixel_values=PIXELS).last_hidden_state
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        assert spyre_sim.current_stack().gap_state("sdpa-seq-align").value == "miscompiled"
        bare = copy.deepcopy(stock).to("spyre")
        with spyre_sim.telemetry.record() as rec:
            bare(pixel_values=PIXELS.to("spyre"))
        assert "sdpa-seq-align" in _miscompiled(rec)
        model = copy.deepcopy(stock)
        spyre_adapters.prepare(model, "2026.09")
        assert "sdpa-key-padding" in {a.name for a in spyre_adapters.applied(model)}
        with spyre_sim.telemetry.record() as rec:
            right = model.to("spyre")(pixel_values=PIXELS.to("spyre")).last_hidden_state.cpu()
        assert "sdpa-seq-align" not in _miscompiled(rec)
    assert _cosine(right, expected) > 0.999


def test_the_miscompile_it_avoids_is_visible_in_the_numbers() -> None:
    """Keys that matter: the partial stick holds the only key each query attends to."""
    q, k, v = _qkv(1, 1, 4, 80)
    k[..., 70, :] = q[..., 0, :] * 4  # every query's best key sits in the partial stick
    expected = F.scaled_dot_product_attention(q, k, v)
    with spyre_sim.use_stack("2026.09"):
        dq, dk, dv = (t.to("spyre") for t in (q, k, v))
        wrong = F.scaled_dot_product_attention(dq, dk, dv).cpu().float()
        args, kwargs = pad_keys((dq, dk, dv), {})
        right = F.scaled_dot_product_attention(*args, **kwargs).cpu().float()
    assert float((right - expected).abs().max()) < 0.05
    assert float((wrong - expected).abs().max()) > 0.5
