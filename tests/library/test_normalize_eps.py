"""normalize-eps 1.0.0: F.normalize of fp16 inputs with an eps fp16 and DL16 hold. Exact
against the stock model on the CPU (fp32: nothing changes; fp16: the same denominators for every
nonzero row), and on the device a zero-padded Swin V2 window no longer normalises to NaN."""

from __future__ import annotations

import copy
from types import ModuleType

import torch
from library_models import apply, assert_rollback_exact, causal_lm, registry_without
from torch import nn

from spyre_adapters.enablement.differential import Case, Outcome, build_case, run_case
from spyre_adapters.library.normalize_eps import HELD_EPS, adapter

#: a configuration the differential campaign drew (seed 0): 48x48 images in 16x16 patches,
#: windows of the 3x3 patch grid padded with zeros; the key projection has no bias
SWIN = {
    "family": "swinv2",
    "sizes": {"name": "drawn", "hidden": 128, "heads": 1, "head_dim": 128, "kv_heads": 1,
              "intermediate": 344, "layers": 1, "vocab": 250, "experts": 4,
              "experts_per_token": 2, "image_size": 48, "patch_size": 16,
              "audio_positions": 32, "seq_len": 1, "batch": 3},
    "features": {"partial_rotary": 0.5, "tie_embeddings": None, "sliding_window": 16},
    "attention": "eager", "padding": "left", "seed": 46196, "decode": False,
}  # fmt: skip


class _Cosine(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, dim=-1)


def _swin() -> tuple[nn.Module, torch.Tensor]:
    built = build_case(Case.from_json(SWIN))
    return built.model, built.inputs["pixel_values"]


def _hidden(model: nn.Module, pixels: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = model(pixel_values=pixels).last_hidden_state
    return out


def test_same_results_as_stock_in_fp32_and_its_shape_and_state() -> None:
    stock, pixels = _swin()
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert torch.equal(_hidden(adapted, pixels), _hidden(stock, pixels))
    assert adapted.state_dict().keys() == stock.state_dict().keys()


def test_in_fp16_a_zero_row_gives_zeros_and_every_other_row_the_stock_numbers() -> None:
    rows = (torch.randn(6, 64) * torch.logspace(-9, 1, 6)[:, None]).half()  # subnormal rows too
    rows[0] = 0.0
    holder = nn.Sequential(_Cosine())
    apply(adapter, holder)
    ours = holder(rows)
    reference = nn.functional.normalize(rows.float(), dim=-1, eps=1e-12)  # the fp32 result
    assert torch.equal(ours[0], torch.zeros(64, dtype=torch.float16))
    assert torch.isnan(nn.functional.normalize(rows, dim=-1)[0]).all()  # stock fp16: 0/0
    # normal-range rows: the fp32 numbers to fp16 precision (subnormal rows lose digits in the
    # host's fp16 kernel, stock or not; they are checked exactly below)
    torch.testing.assert_close(ours[3:].float(), reference[3:], rtol=2e-3, atol=1e-3)
    # exact: every nonzero fp16 row's norm is at least the eps used, so the same denominator
    norms = rows.float().norm(dim=-1)
    assert bool((norms[1:] >= HELD_EPS).all())
    same = nn.functional.normalize(rows[1:], dim=-1, eps=HELD_EPS)
    assert torch.equal(ours[1:], same)


def test_matches_only_forwards_that_call_normalize() -> None:
    assert not adapter.matches(causal_lm("llama"))
    assert adapter.matches(nn.Sequential(_Cosine()))


def test_rollback_restores_the_model_exactly() -> None:
    model, pixels = _swin()
    assert_rollback_exact(adapter, model, lambda m: _hidden(m, pixels))  # type: ignore[arg-type]


def test_swin_v2_with_padded_windows_matches_on_the_device(spyre: ModuleType) -> None:
    case = Case.from_json(SWIN)
    built = build_case(case)
    run = run_case(case, built, "2026.09")
    assert run.outcome is Outcome.MATCH, run.detail
    assert "normalize-eps 1.0.0" in run.adapters
    assert "eps-underflow" not in run.miscompiles
    without = run_case(case, built, "2026.09", registry=registry_without(adapter.name))
    assert without.outcome is Outcome.FLAGGED, without.detail  # NaN, and said so
    assert "eps-underflow" in without.miscompiles
