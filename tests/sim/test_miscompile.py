"""Miscompiles are reproduced deterministically and recorded, only while the gap says so."""

from __future__ import annotations

import os
import subprocess
import sys
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
    snap = spyre.telemetry.snapshot().to_json()
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
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["layernorm-nan"]["count"] == 1
    with spyre.use_stack(_closed_release(tmp_path, "layernorm-nan")), torch.no_grad():
        assert not torch.isnan(norm(x).cpu()).any()


def test_layernorm_nan_judges_the_rows_variance_whatever_eps(spyre: ModuleType) -> None:
    """Transformers' tests set every norm's eps to 1.0: rstd is then 1.0 in 16 bits for any
    small variance, and must not make ordinary rows look near-constant."""
    torch.manual_seed(0)
    rows = (torch.randn(4, 10) * 0.02).half()  # variance about 4e-4: not near-constant
    rows[2] = 0.25  # constant
    norm = torch.nn.LayerNorm(10, eps=1.0).half().to("spyre")
    with torch.no_grad():
        out = norm(rows.to("spyre")).cpu()
    assert torch.isnan(out[2]).all()
    assert not torch.isnan(out[[0, 1, 3]]).any()
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["layernorm-nan"]["count"] == 1


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
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["sdpa-strided"]["count"] == 2
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
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["mem-pool"]["count"] == 1


_POOL_PROBE = """
import torch, spyre_sim
cache = torch.ones(1, 2, 3, 64, dtype=torch.float16).to("spyre")
new = torch.full((1, 2, 1, 64), 2.0, dtype=torch.float16).to("spyre")
with spyre_sim.use_stack("2026.08"):
    grown = torch.cat((cache, new), dim=-2).cpu()
print(int((grown[:, :, :3] == 1).all()), spyre_sim.telemetry.snapshot().to_json()["miscompiles"])
"""


@pytest.mark.parametrize(("setting", "expected"), [("0", "1 {}"), ("1", "0 {'mem-pool'")])
def test_the_upstream_workaround_of_the_pool_regression(setting: str, expected: str) -> None:
    """``HBM_POOL_PLANNING=0`` (torch-spyre #3980) turns the pool planning off, and with it
    the 2026.08 regression; it is read when the device is imported, as torch-spyre reads it."""
    env = dict(os.environ, HBM_POOL_PLANNING=setting)
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _POOL_PROBE],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.startswith(expected), done.stdout + done.stderr


def test_the_pool_switch_set_after_import_changes_nothing(
    spyre: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBM_POOL_PLANNING", "0")  # too late: read when the device is imported
    cache = torch.ones(1, 2, 3, 64, dtype=torch.float16).to("spyre")
    new = torch.full((1, 2, 1, 64), 2.0, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.08"):
        assert (torch.cat((cache, new), dim=-2).cpu()[:, :, :3] == 0).all()


# --- newer evidence (docs/STACK.md §8) --------------------------------------------------------


def test_topk_largest_false_returns_the_largest(spyre: ModuleType) -> None:
    host = spyre.round_to_dl16(torch.randn(2, 64, dtype=torch.float16))
    x = host.to("spyre")
    smallest = torch.topk(host, 3, largest=False)
    got = torch.topk(x, 3, largest=False)
    assert torch.equal(got.values.cpu(), torch.topk(host, 3).values)
    assert not torch.equal(got.values.cpu(), smallest.values)
    assert torch.equal(torch.topk(x, 3).values.cpu(), torch.topk(host, 3).values)  # largest=True
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["topk-largest"]["count"] == 1


def test_pow_cube_is_abs_to_the_fourth_until_2026_09(spyre: ModuleType) -> None:
    host = spyre.round_to_dl16(torch.linspace(-2, 2, 64, dtype=torch.float16).reshape(1, 64))
    x = host.to("spyre")
    with spyre.use_stack("2026.08"):
        wrong = x.pow(3).cpu()
    square = host * host  # fp16 on the host, as the reproduction computes it
    assert torch.equal(wrong, spyre.round_to_dl16(square * square))
    assert (wrong >= 0).all()  # the sign is lost
    with spyre.use_stack("2026.09"):
        torch.testing.assert_close(x.pow(3).cpu(), host.pow(3), atol=2e-2, rtol=5e-3)
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["pow-cube"]["count"] == 1


def _rms_variance(x: torch.Tensor) -> torch.Tensor:
    # the stock HF RMSNorm statistics: an fp32 upcast, a square, a mean over the last dim
    return x.to(torch.float32).pow(2).mean(-1, keepdim=True)


def test_fp32_mean_over_more_than_32_rows_in_2026_07(spyre: ModuleType) -> None:
    host = spyre.round_to_dl16(torch.rand(64, 128, dtype=torch.float16) + 0.5)
    x = host.to("spyre")
    ref = host.float().pow(2).mean(-1, keepdim=True)
    with spyre.use_stack("2026.07"):
        wrong = _rms_variance(x).cpu().float()
        few = _rms_variance(x[:32]).cpu().float()  # 32 rows: right
        plain = x.pow(2).mean(-1, keepdim=True).cpu().float()  # no upcast: right
    assert (wrong[32:] == 0).all()
    torch.testing.assert_close(wrong[:32], ref[:32], atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(few, ref[:32], atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(plain, ref, atol=1e-2, rtol=1e-2)
    with spyre.use_stack("2026.08"):
        torch.testing.assert_close(_rms_variance(x).cpu().float(), ref, atol=1e-2, rtol=1e-2)
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["fp32-reduce-rows"]["count"] == 1


def test_a_cast_back_to_16_bit_ends_the_fp32_values(spyre: ModuleType) -> None:
    """The device stores fp32 as a 16-bit type, so ``x.float()`` reads as float16 and a model's
    ``.to(torch.float16)`` back is a no-op in PyTorch. On the device that cast ends the fp32
    values: a reduction after it is a 16-bit one, not ``fp32-reduce-rows`` (Inkling keeps a
    block in fp32 and casts back; its norms then met the miscompile in the emulator only)."""
    host = spyre.round_to_dl16(torch.rand(64, 128, dtype=torch.float16) + 0.5)
    x = host.to("spyre")
    ref = host.float().pow(2).mean(-1, keepdim=True)
    with spyre.use_stack("2026.07"):
        upcast = x.float()
        back = [upcast.to(torch.float16), upcast.half(), upcast.to(dtype=torch.float16),
                upcast.to(x)]  # fmt: skip
        for y in back:
            assert y.dtype is torch.float16
            got = y.pow(2).mean(-1, keepdim=True).cpu().float()
            torch.testing.assert_close(got, ref, atol=1e-2, rtol=1e-2)
        assert "fp32-reduce-rows" not in spyre.telemetry.snapshot().to_json()["miscompiles"]
        kept = upcast.to(torch.float32)  # still fp32 on the device: the miscompile stays
        assert (kept.pow(2).mean(-1, keepdim=True).cpu()[32:] == 0).all()
        assert x.to(torch.float16) is x  # nothing upcast: the no-op PyTorch gives
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["fp32-reduce-rows"]["count"] == 1


def test_sdpa_with_a_partial_last_key_stick(spyre: ModuleType) -> None:
    f = torch.nn.functional.scaled_dot_product_attention
    q = spyre.round_to_dl16(torch.randn(1, 2, 4, 64, dtype=torch.float16))
    kv = spyre.round_to_dl16(torch.randn(1, 2, 100, 64, dtype=torch.float16))  # 64 + 36 keys
    ref = f(q.float(), kv.float(), kv.float())
    blanked = kv.clone()
    blanked[..., 64:, :] = 0
    dq, dkv = q.to("spyre"), kv.to("spyre")
    wrong = f(dq, dkv, dkv).cpu().float()
    assert not torch.allclose(wrong, ref, atol=5e-3, rtol=5e-3)
    torch.testing.assert_close(
        wrong, f(q.float(), blanked.float(), kv.float()), atol=5e-3, rtol=5e-3
    )
    for keys in (64, 128, 40):  # whole sticks, or one partial stick only: right
        k = spyre.round_to_dl16(torch.randn(1, 2, keys, 64, dtype=torch.float16))
        dk = k.to("spyre")
        torch.testing.assert_close(
            f(dq, dk, dk).cpu().float(), f(q.float(), k.float(), k.float()), atol=5e-3, rtol=5e-3
        )
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["sdpa-seq-align"]["count"] == 1


def test_packed_qkv_views_read_the_start_of_the_buffer_until_2026_09(spyre: ModuleType) -> None:
    host = spyre.round_to_dl16(torch.randn(2, 8, 3 * 128, dtype=torch.float16))  # [b, s, 3hd]

    def heads(t: torch.Tensor) -> list[torch.Tensor]:
        return [p.view(2, 8, 2, 64).transpose(1, 2) for p in t.split(128, dim=-1)]

    q, k, _v = heads(host)
    ref_k = k.contiguous()
    dq, dk, _dv = heads(host.to("spyre"))
    with spyre.use_stack("2026.08"):
        assert torch.equal(dq.contiguous().cpu(), q.contiguous())  # offset 0: right
        assert torch.equal(dk.contiguous().cpu(), q.contiguous())  # K reads Q's slice
        assert torch.equal(host.to("spyre")[:, -1:, :].contiguous().cpu(), host[:, -1:, :])
    with spyre.use_stack("2026.09"):
        assert torch.equal(dk.contiguous().cpu(), ref_k)
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["offset-view-input"]["count"] == 1


def test_decode_query_heads_are_mixed_in_2026_07(spyre: ModuleType) -> None:
    f = torch.nn.functional.scaled_dot_product_attention
    qh = spyre.round_to_dl16(torch.randn(1, 1, 4, 64, dtype=torch.float16))  # [b, 1, h, d]
    kv = spyre.round_to_dl16(torch.randn(1, 4, 9, 64, dtype=torch.float16))
    ref = f(qh.transpose(1, 2).float(), kv.float(), kv.float())
    q = qh.to("spyre").transpose(1, 2)  # [b, h, 1, d] over a heads-inner buffer
    dkv = kv.to("spyre")
    with spyre.use_stack("2026.07"):
        wrong = f(q, dkv, dkv).cpu().float()
    assert not torch.allclose(wrong, ref, atol=5e-3, rtol=5e-3)
    torch.testing.assert_close(
        wrong, f(qh.transpose(1, 2).flip(1).float(), kv.float(), kv.float()), atol=5e-3, rtol=5e-3
    )
    for name in ("2026.06", "2026.08"):
        with spyre.use_stack(name):
            torch.testing.assert_close(
                f(q, dkv, dkv).cpu().float(), ref, atol=5e-3, rtol=5e-3, msg=name
            )
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["decode-query-layout"]["count"] == 1


def test_scratchpad_broadcast_of_one_reduced_value_in_2026_06_and_2026_07(
    spyre: ModuleType,
) -> None:
    host = spyre.round_to_dl16(torch.rand(1, 1, 4096, dtype=torch.float16) + 0.5)
    x = host.to("spyre")
    for name in ("2026.06", "2026.07"):
        with spyre.use_stack(name):
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # [1, 1, 1]
            wrong = (x * scale).cpu()
        assert (wrong.reshape(-1)[128:] == 0).all(), name  # 64 sticks over 32 cores: 2 each
        assert (wrong.reshape(-1)[:128] != 0).all(), name
    for name in ("2026.05", "2026.08"):
        with spyre.use_stack(name):
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            assert (x * scale).cpu().ne(0).all(), name
    two_rows = spyre.round_to_dl16(torch.rand(2, 1, 4096, dtype=torch.float16) + 0.5).to("spyre")
    with spyre.use_stack("2026.07"):
        scale = torch.rsqrt(two_rows.pow(2).mean(-1, keepdim=True) + 1e-6)  # [2, 1, 1]
        assert (two_rows * scale).cpu().ne(0).all()
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["scratchpad-placement"]["count"] == 2


def test_broadcast_views_are_no_packed_views(spyre: ModuleType) -> None:
    # an expanded view has stride-0 dims; a copy of one at an offset is not the packed pattern
    host = spyre.round_to_dl16(torch.randn(4, 96, dtype=torch.float16))
    x = host.to("spyre")
    with spyre.use_stack("2026.08"):
        row = x[1:2, 32:]  # offset 128: inside the second row of 96
        assert torch.equal(row.clone().cpu(), host[1:2, :64])  # read from the row start
        expanded = row.expand(3, 64)  # a stride-0 dim hides the row pitch: not reproduced
        assert torch.equal(expanded.contiguous().cpu(), host[1:2, 32:].expand(3, 64))
        assert torch.equal(
            x[:, None, 0].expand(4, 5).contiguous().cpu(), host[:, None, 0].expand(4, 5)
        )
    with spyre.use_stack("2026.09"):
        assert torch.equal(x[1:2, 32:].clone().cpu(), host[1:2, 32:])


@pytest.mark.parametrize(
    ("packet", "gaps"),
    [
        ("aten.cat", ("rotate-half", "mem-pool")),
        ("aten.pow", ("pow-cube", "fp32-reduce-rows")),
        ("aten.mul", ("fp32-reduce-rows", "scratchpad-placement")),
        ("aten.div", ("fp32-reduce-rows", "scratchpad-placement")),
        (
            "aten.scaled_dot_product_attention",
            ("sdpa-strided", "sdpa-seq-align", "offset-view-input", "decode-query-layout"),
        ),
    ],
)
def test_an_ops_reproductions_are_tried_in_a_fixed_order(
    spyre: ModuleType, packet: str, gaps: tuple[str, ...]
) -> None:
    # the first reproduction that changes a result decides, and an op's reproductions come
    # from several modules: their import order in spyre_sim.miscompile is this order
    from spyre_sim import miscompile

    assert tuple(m.gap for m in miscompile.miscompiles_for(packet)) == gaps


def test_an_epsilon_below_the_device_range_is_zero_and_recorded(spyre: ModuleType) -> None:
    # F.normalize clamps the norm at eps=1e-12, which DL16 (smallest number 2**-30) and the
    # emulator's fp16 host storage hold as zero: a zero row gives 0/0
    class Cosine(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.normalize(t, dim=-1)

    rows = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float16)
    on_cpu = Cosine()(rows.float())
    assert torch.equal(on_cpu[1], torch.zeros(2))
    model = Cosine().to("spyre")
    with spyre.use_stack("2026.09"), torch.no_grad():
        nonzero = model(rows[:1].to("spyre")).cpu()  # every norm above the bound: not recorded
        assert "eps-underflow" not in spyre.telemetry.snapshot().to_json()["miscompiles"]
        out = model(rows.to("spyre")).cpu()
    assert torch.allclose(nonzero.float(), on_cpu[:1], atol=2e-3)
    assert torch.isnan(out[1]).all()  # what the device computes, reported as a miscompile
    recorded = spyre.telemetry.snapshot().to_json()["miscompiles"]["eps-underflow"]
    assert recorded["count"] == 1
    with torch.no_grad():
        safe = torch.tensor([[0.0, 0.0]], dtype=torch.float16).to("spyre").clamp_min(1e-3)
    assert (safe.cpu() > 0).all()  # a bound it holds: kept, and not recorded
    assert spyre.telemetry.snapshot().to_json()["miscompiles"]["eps-underflow"]["count"] == 1


def test_an_added_epsilon_below_the_device_range_is_zero_and_recorded(spyre: ModuleType) -> None:
    # TAPAS divides by count + 1e-10: DL16 (smallest number 2**-30) holds 1e-10 as zero, so a
    # count of zero stays zero and the division gives 0/0 where the CPU gives 0
    class Average(torch.nn.Module):
        def forward(self, total: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
            return total / (count + 1e-10)

    total = torch.tensor([6.0, 0.0], dtype=torch.float16)
    count = torch.tensor([3.0, 0.0], dtype=torch.float16)
    on_cpu = Average()(total.float(), count.float())
    assert on_cpu.tolist() == [2.0, 0.0]
    model = Average().to("spyre")
    with spyre.use_stack("2026.09"), torch.no_grad():
        some = model(total[:1].to("spyre"), count[:1].to("spyre")).cpu()  # no count below 1e-10
        assert "eps-underflow" not in spyre.telemetry.snapshot().to_json()["miscompiles"]
        out = model(total.to("spyre"), count.to("spyre")).cpu()
        assert torch.isnan(out[1])  # what the device computes, reported as a miscompile
        recorded = spyre.telemetry.snapshot().to_json()["miscompiles"]["eps-underflow"]
        assert recorded["count"] == 1
        # numbers the device holds, and subtraction with alpha, follow the same rule
        held = count.to("spyre") + 1e-3
        assert "eps-underflow" in spyre.telemetry.snapshot().to_json()["miscompiles"]
        lost = torch.sub(count.to("spyre"), 1e-6, alpha=1e-4)
    assert some.tolist() == [2.0]
    assert (held.cpu() > 0).all()
    assert torch.equal(lost.cpu(), count)
    final = spyre.telemetry.snapshot().to_json()["miscompiles"]["eps-underflow"]["count"]
    assert final == 2  # the held 1e-3 not recorded, the lost 1e-10 (1e-6 * 1e-4) recorded


@pytest.mark.parametrize("form", ["add_", "sub_", "clamp_", "out="])
def test_in_place_forms_of_the_epsilon_ops_are_recorded(spyre: ModuleType, form: str) -> None:
    """The in-place (and ``out=``) forms of ``add``, ``sub`` and ``clamp`` meet the same rule:
    an epsilon below DL16's smallest number is the device's ``eps-underflow``; one DL16 holds
    and fp16 does not (1e-8) is lost to the written fp16 host tensor, and the emulator limit is
    counted. Before, an in-place write lost either without a word."""

    def write(x: torch.Tensor, eps: float) -> None:
        if form == "add_":
            x.add_(eps)
        elif form == "sub_":
            x.sub_(eps)
        elif form == "clamp_":
            x.clamp_(min=eps)
        else:
            torch.add(x, eps, out=x)

    for eps, kind in ((1e-10, "miscompiles"), (1e-8, "emulator_limits")):
        with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as run:
            x = torch.zeros(2, 64, dtype=torch.float16).to("spyre")
            write(x, eps)
        snap = run.snapshot.to_json()
        name = "eps-underflow" if kind == "miscompiles" else "fp16-holder"
        assert snap[kind][name]["count"] == 1, (eps, snap)
        other = "emulator_limits" if kind == "miscompiles" else "miscompiles"
        assert snap[other] == {}
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as run:
        held = torch.ones(2, 64, dtype=torch.float16).to("spyre")
        write(held, 1e-8)  # nothing below the epsilon: the write loses nothing
    snap = run.snapshot.to_json()
    assert snap["miscompiles"] == {}
    assert snap["emulator_limits"] == {}


def test_a_number_dl16_holds_but_fp16_does_not_is_kept(spyre: ModuleType) -> None:
    # CHMv2 shifts its depth logits by 1e-8 before normalising them: 1e-8 is a DL16 number
    # (the smallest is 2**-30), so the device keeps it; the emulator's fp16 host tensors flush
    # it (their smallest subnormal is 6e-8). The add is computed again with its DL16 values
    # kept beside the host tensor (spyre_sim._wide_values), so the normalised row is the
    # device's: uniform, where the flushed shift gave 0 / 1e-8 = 0. Not the device's
    # eps-underflow miscompile, and no emulator limit.
    class Shift(torch.nn.Module):
        def forward(self, logits: torch.Tensor) -> torch.Tensor:
            shifted = logits + 1e-8
            return shifted / shifted.sum(-1, keepdim=True).clamp_min(1e-8)

    zeros = torch.zeros(1, 4, dtype=torch.float16)
    model = Shift().to("spyre")
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as run:
        out = model(zeros.to("spyre")).cpu()
    assert out.tolist() == [[0.25] * 4]
    snap = run.snapshot.to_json()
    assert "eps-underflow" not in snap["miscompiles"]
    assert snap["emulator_limits"] == {}
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as read:
        (zeros.to("spyre") + 1e-8).cpu()  # read in fp16, which cannot hold 1e-8
    assert read.snapshot.to_json()["emulator_limits"]["fp16-holder"]["count"] == 1
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as held:
        model(torch.ones(1, 4, dtype=torch.float16).to("spyre"))  # nothing below the numbers
    assert held.snapshot.to_json()["emulator_limits"] == {}
    # a snapshot written before the field existed reads as no limits
    doc = dict(snap)
    del doc["emulator_limits"]
    assert spyre.telemetry.Snapshot.from_json(doc).emulator_limits == {}
