"""Miscompiles are reproduced deterministically and recorded, only while the gap says so."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _closed_release(tmp_path: Path, gap: str) -> Path:
    path = tmp_path / f"fixed-{gap}.toml"
    path.write_text(
        'schema_version = 1\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        f'date = 2026-11-20\nsummary = "2026.09 with {gap} fixed"\n[gaps]\n{gap} = "closed"\n'
    )
    return path


def test_rotate_half_is_wrong_and_recorded(spyre: ModuleType, tmp_path: Path) -> None:
    host = torch.randn(2, 4, 8, 128, dtype=torch.float16)
    x = host.to("spyre")
    expected = _rotate_half(spyre.round_to_dl16(host))

    class Rotary(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return _rotate_half(t)

    model = torch.nn.Sequential(Rotary())
    wrong = model(x).cpu()
    assert not torch.equal(wrong, expected)
    assert torch.equal(wrong, -expected)  # documented: cat([x2, -x1]) = -rotate_half(x)
    assert torch.equal(model(x).cpu(), wrong)  # deterministic
    snap = spyre.telemetry.snapshot()
    assert snap["miscompiles"]["rotate-half"]["count"] == 2
    assert snap["miscompiles"]["rotate-half"]["modules"] == ["0"]
    # not the pattern: a cat of two unrelated tensors is right
    a, b = x[..., :64].clone(), x[..., 64:].clone()
    assert torch.equal(torch.cat((-b, a), dim=-1).cpu(), expected)
    with spyre.use_stack(_closed_release(tmp_path, "rotate-half")):
        assert torch.equal(model(x).cpu(), expected)


def test_layernorm_nan_on_near_constant_rows(spyre: ModuleType, tmp_path: Path) -> None:
    rows = torch.randn(3, 64, dtype=torch.float16)
    rows[1] = 0.5  # a constant row
    x = rows.to("spyre")
    norm = torch.nn.LayerNorm(64).half().to("spyre")
    with torch.no_grad():
        out = norm(x).cpu()
    assert torch.isnan(out[1]).all()
    assert not torch.isnan(out[0]).any()
    assert not torch.isnan(out[2]).any()
    assert spyre.telemetry.snapshot()["miscompiles"]["layernorm-nan"]["count"] == 1
    with spyre.use_stack(_closed_release(tmp_path, "layernorm-nan")), torch.no_grad():
        assert not torch.isnan(norm(x).cpu()).any()


def test_sdpa_on_strided_views_from_2026_05_to_2026_08(spyre: ModuleType) -> None:
    # the first SDPA decomposition copied q/k/v (#921); the copy went on May 20 (#2196); the
    # miscompile was fixed in September (#4331, #4376)
    f = torch.nn.functional.scaled_dot_product_attention
    host = torch.randn(1, 8, 4, 64, dtype=torch.float16)  # [b, s, h, d]
    x = host.to("spyre").transpose(1, 2)  # [b, h, s, d], not contiguous
    ref = f(*(spyre.round_to_dl16(host).transpose(1, 2).float(),) * 3)
    for name in ("2026.05", "2026.08"):
        with spyre.use_stack(name):
            wrong = f(x, x, x).cpu().float()
            right = f(x.contiguous(), x.contiguous(), x.contiguous()).cpu().float()
        assert torch.allclose(right, ref, atol=5e-3, rtol=5e-3)
        assert not torch.allclose(wrong, ref, atol=5e-3, rtol=5e-3), name
    assert spyre.telemetry.snapshot()["miscompiles"]["sdpa-strided"]["count"] == 2
    for name in ("2026.03", "2026.09"):
        with spyre.use_stack(name):
            assert torch.allclose(f(x, x, x).cpu().float(), ref, atol=5e-3, rtol=5e-3), name


def test_mem_pool_regression_only_in_2026_08(spyre: ModuleType) -> None:
    cache = torch.ones(1, 2, 3, 64, dtype=torch.float16).to("spyre")
    new = torch.full((1, 2, 1, 64), 2.0, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.08"):
        grown = torch.cat((cache, new), dim=-2).cpu()
    assert (grown[:, :, :3] == 0).all()
    assert (grown[:, :, 3] == 2).all()
    with spyre.use_stack("2026.09"):
        assert (torch.cat((cache, new), dim=-2).cpu()[:, :, :3] == 1).all()
    assert spyre.telemetry.snapshot()["miscompiles"]["mem-pool"]["count"] == 1
