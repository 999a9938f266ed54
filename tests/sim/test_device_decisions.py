"""Decisions for ops on the device: native, cpu-fallback, unsupported, and their caching."""

from __future__ import annotations

import warnings
from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreDowncastWarning")


def _dev(*shape: int) -> torch.Tensor:
    return torch.ones(*shape, dtype=torch.float16, device="spyre")


def test_native_ops_are_counted(spyre: ModuleType) -> None:
    a = _dev(2, 64)
    _ = a + a
    _ = a + a
    ops = spyre.telemetry.snapshot().to_json()["ops"]
    assert ops["aten.add.Tensor"] == {"native": 2}


def test_fallback_warns_once_and_counts_transfers(spyre: ModuleType) -> None:
    from spyre_sim.state import device_state

    device_state.forget_warnings()
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    with spyre.telemetry.record() as rec, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        a = torch.cumsum(x, dim=-1)
        b = torch.cumsum(x, dim=-1)
    fallback_warnings = [w for w in seen if issubclass(w.category, spyre.SpyreFallbackWarning)]
    assert [str(w.message) for w in fallback_warnings] == [
        "aten.cumsum.default is falling back to cpu"
    ]
    assert torch.equal(a.cpu(), b.cpu())
    assert a.cpu()[0, -1].item() == 64.0
    snap = rec.snapshot.to_json()
    assert snap["fallbacks"] == {"aten.cumsum.default": 2}
    assert snap["ops"]["aten.cumsum.default"] == {"cpu-fallback": 2}
    transfers = snap["transfers"]
    assert transfers["device_to_host"] == 2
    assert transfers["host_to_device"] == 2
    assert transfers["device_to_host_bytes"] == 2 * 2 * 64 * 2
    assert snap["gaps"]["cumsum"]["count"] == 2


def test_unsupported_error_has_every_field(spyre: ModuleType) -> None:
    class Rope(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rotary = Rope()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rotary(x)

    with spyre.use_stack("2026.03"):
        # at 2026.03 sin is a fallback, so pick an op the release cannot lower: sort
        x = _dev(2, 64)
        with pytest.raises(spyre.SpyreLoweringError) as info:
            torch.sort(x)
    err = info.value
    assert err.op == "aten.sort.default"
    assert err.release == "2026.03"
    assert err.gap == "sort"
    assert err.closes_in is None
    assert not err.lasting
    assert err.dtypes == ("float16",)
    assert err.shapes == ((2, 64),)
    assert "aten.sort.default(float16[2, 64])" in str(err)
    model = Model()
    x = _dev(2, 64)  # filling with ones is not lowered at 2025.12: make it before
    with spyre.use_stack("2025.12"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", spyre.SpyreFallbackWarning)
            model(x)  # sin falls back at 2025.12
        assert spyre.telemetry.snapshot().to_json()["gaps"]["sin-cos"]["modules"] == ["rotary"]
        with pytest.raises(spyre.SpyreLoweringError) as info2:
            torch.nn.functional.softmax(x, dim=-1)
    assert info2.value.gap == "softmax"
    assert info2.value.closes_in == "2026.03"
    assert spyre.telemetry.snapshot().to_json()["errors"]["softmax"] == 1


def test_module_path_in_errors(spyre: ModuleType) -> None:
    inner = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Softmax(dim=-1))
    outer = torch.nn.Sequential(inner)
    x = _dev(2, 64)
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as info:
        outer(x)
    assert info.value.module_path == "0.1"
    assert "in 0.1" in str(info.value)


def test_decisions_are_cached(spyre: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from spyre_sim import _lowering

    calls: list[str] = []
    real = _lowering.decide

    def spy(info: object, hargs: object, hkwargs: object) -> object:
        calls.append(info.name)  # type: ignore[attr-defined]
        return real(info, hargs, hkwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_lowering, "decide", spy)
    a = _dev(2, 64)
    with spyre.use_stack("2026.05"):
        for _ in range(5):
            a = a * 1
    assert calls.count("aten.mul.Tensor") == 1
    with spyre.use_stack("2026.06"):  # a new release decides again
        a = a * 1
    assert calls.count("aten.mul.Tensor") == 2


def test_sdpa_and_gqa_by_release(spyre: ModuleType) -> None:
    f = torch.nn.functional.scaled_dot_product_attention
    q = torch.randn(1, 4, 8, 64, dtype=torch.float16).to("spyre")
    kv = torch.randn(1, 2, 8, 64, dtype=torch.float16).to("spyre")
    k4 = torch.randn(1, 4, 8, 64, dtype=torch.float16).to("spyre")
    with spyre.configure(layout_checks=False):
        with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as e1:
            f(q, k4, k4)
        assert e1.value.gap == "sdpa"
        with spyre.use_stack("2026.03"):
            assert f(q, k4, k4).shape == (1, 4, 8, 64)
            with pytest.raises(spyre.SpyreLoweringError) as e2:
                f(q, kv, kv, enable_gqa=True)
            assert e2.value.gap == "sdpa-gqa"
            assert e2.value.closes_in == "2026.05"
        with spyre.use_stack("2026.05"):
            out = f(q, kv, kv, enable_gqa=True)
    ref = f(q.cpu().float(), kv.cpu().float(), kv.cpu().float(), enable_gqa=True)
    assert torch.allclose(out.cpu().float(), ref, atol=5e-3, rtol=5e-3)


def test_user_release_file(spyre: ModuleType, tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "whatif-2026.11.toml"
    path.write_text(
        'schema_version = 1\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        'date = 2026-11-20\nsummary = "2026.09 + cumsum on the device"\n'
        '[gaps]\ncumsum = "closed"\n[ops]\n"aten.cumsum" = "native"\n'
    )
    x = _dev(2, 64)
    with spyre.use_stack(path):
        torch.cumsum(x, dim=-1)
    assert spyre.telemetry.snapshot().to_json()["ops"]["aten.cumsum.default"] == {"native": 1}
    assert spyre.telemetry.snapshot().to_json()["fallbacks"] == {}


@pytest.mark.parametrize("release", ["2025.12", "2026.05", "2026.09"])
def test_in_place_views_are_native(spyre: ModuleType, release: str) -> None:
    """The in-place forms of view ops (metadata only) have their views' verdict at every
    release: ``torch.matmul`` of a 1-D operand ends with ``squeeze_`` (Funnel's pooled
    positions met it through a padded matmul), ``unsqueeze_`` and ``t_`` likewise."""
    vector = torch.arange(64, dtype=torch.float16) / 64
    matrix = torch.eye(64, dtype=torch.float16)[:, :64]
    with spyre.use_stack(release), spyre.telemetry.record() as rec:
        out = torch.matmul(vector.to("spyre"), matrix.to("spyre"))
        x = torch.ones(2, 64, dtype=torch.float16).to("spyre")
        x.unsqueeze_(0).squeeze_(0).t_()
    assert torch.equal(out.cpu(), spyre.round_to_dl16(vector))
    assert x.shape == (64, 2)
    ops = rec.snapshot.to_json()["ops"]
    for name in ("aten.squeeze_.dim", "aten.unsqueeze_.default", "aten.t_.default"):
        assert set(ops[name]) == {"native"}, (name, ops[name])


@pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreFallbackWarning")
@pytest.mark.parametrize("stack", ["2025.12", "2026.09"])
def test_randint_inside_a_forward_is_drawn_on_the_host(spyre: ModuleType, stack: str) -> None:
    """``torch.randint(..., device=)`` reaches the device as ``random_.from`` on an empty
    tensor (DiffusionGemma samples its canvas so): a cpu-fallback of gap ``random`` like every
    random op, with the values in range, not the catch-all ``unlowered-op``."""

    class Canvas(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.randint(low=0, high=99, size=(x.shape[0], 16), device=x.device)

    with spyre.use_stack(stack), spyre.telemetry.record() as rec:
        out = Canvas()(torch.ones(3, 64, dtype=torch.float16).to("spyre"))
    values = out.cpu()
    assert values.shape == (3, 16)
    assert values.dtype in (torch.int64, torch.int32)
    assert int(values.min()) >= 0
    assert int(values.max()) < 99
    snap = rec.snapshot.to_json()
    assert snap["fallbacks"] == {"aten.random_.from": 1}
    assert "random" in snap["gaps"]
    assert "unlowered-op" not in snap["gaps"]
