"""``integer-pow``: a refused power of an integer tensor computed as PyTorch computes it.

CPU: :func:`integer_power` equals ``torch.pow`` bit for bit (float exponents through the cast to
the result dtype, integer exponents through products, wrap-around included) and declines every
other call. Device: LightGlue's ``torch.full((), dim) ** 0.25`` and VideoLLaMA 3's
``sizes ** 2`` stop a model at ``pow-int-base`` without the adapter and match the CPU with it
at 2026.09; at 2026.05 a float ``pow`` the generated ``bridge-pow-tensor-scalar`` rewrites is
still rewritten with this adapter's handler installed around it. Matching, declines, rollback,
and nothing the model shows changes; 1.0.1 (the same question asked once per code object)
finds the targets 1.0.0 finds."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    apply,
    assert_rollback_exact,
    base_model,
    causal_lm,
    device_runs,
    vision_model,
)
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library import integer_pow_v1_0_1
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.integer_pow import KIND, adapter, computes_power, integer_power

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.SpyreSimWarning")

VERSIONS = [adapter, integer_pow_v1_0_1.adapter]

BASES = [
    torch.tensor(256),  # LightGlue: torch.full((), descriptor_dim)
    torch.tensor([1, 2, 3, 4], dtype=torch.int32),  # VideoLLaMA 3's merge sizes
    torch.arange(-7, 9, dtype=torch.int64).reshape(4, 4),
    torch.tensor([46341, -46341, 2**20], dtype=torch.int32),  # products that wrap around
]


@pytest.mark.parametrize("base", BASES, ids=lambda b: f"{b.dtype}{list(b.shape)}")
@pytest.mark.parametrize("exponent", [0.25, 0.5, -0.5, 2.0, 1, 2, 3, 5, 8])
def test_the_cpu_values_are_torch_pow_exactly(base: torch.Tensor, exponent: float) -> None:
    out = integer_power(base, exponent)
    ref = torch.pow(base, exponent)
    assert out is not None
    assert out.dtype == ref.dtype
    assert out.shape == ref.shape
    assert torch.equal(out, ref) or torch.equal(out.isnan(), ref.isnan())
    assert out is not base  # a new tensor, as pow returns


@pytest.mark.parametrize(
    ("base", "exponent"),
    [
        (torch.tensor([1.5, 2.0]), 2),  # a float base: not this adapter's
        (torch.tensor([True, False]), 2),  # bool
        (torch.tensor([2, 3]), 0),  # ones: another op the device may refuse
        (torch.tensor([2, 3]), -1),  # PyTorch refuses integers to negative powers
        (torch.tensor([2, 3]), True),  # a bool exponent
        (torch.tensor([2, 3]), torch.tensor(2)),  # a tensor exponent: pow.Tensor_Tensor
    ],
)
def test_other_calls_are_declined(base: torch.Tensor, exponent: object) -> None:
    assert integer_power(base, exponent) is None


class Scaled(nn.Module):
    """LightGlue's descriptor scaling and VideoLLaMA 3's patch count, in one forward."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor, sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = torch.full((), 64, device=x.device) ** 0.25
        return self.proj(x) / scale, sizes**2


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(2, 64), torch.tensor([1, 2, 3], dtype=torch.int32)


def _model() -> Scaled:
    torch.manual_seed(1)
    return Scaled().eval()


def test_the_device_stops_without_it_and_matches_the_cpu_with_it() -> None:
    x, sizes = _inputs()
    with torch.no_grad():
        ref, ref_count = _model()(x, sizes)
    stopped, (out, count) = device_runs(_model, (x, sizes), adapter.name, "2026.09")
    assert isinstance(stopped, spyre_sim.SpyreLoweringError)
    assert stopped.gap == "pow-int-base"
    assert torch.equal(count.cpu().long(), ref_count.long())
    assert torch.allclose(out.cpu().float(), ref, atol=2e-3)


def test_it_shares_pow_with_the_generated_bridge_that_rewrites_float_bases() -> None:
    """At 2026.05 ``pow(x, 0.5)`` stops at ``pow-exponent`` and the generated
    ``bridge-pow-tensor-scalar`` rewrites it; both adapters handle refused ``pow`` calls. Each
    computes its own calls and declines the other's, which then go to the other handler: the
    float power is rewritten and the integer one multiplied, in one forward."""

    class Norm(nn.Module):
        def forward(self, x: torch.Tensor, sizes: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return x / x.pow(2).sum(-1, keepdim=True).pow(0.5), sizes**2

    x, sizes = torch.rand(2, 64) + 0.5, torch.tensor([1, 2, 3], dtype=torch.int32)
    ref, ref_count = Norm()(x, sizes)
    with torch.no_grad(), spyre_sim.use_stack("2026.05"):
        model = Norm()
        spyre_adapters.prepare(model, "2026.05")
        names = {a.name for a in spyre_adapters.applied(model)}
        assert {"integer-pow", "bridge-pow-tensor-scalar"} <= names
        out, count = model.to("spyre")(x.to("spyre"), sizes.to("spyre"))
    assert torch.allclose(out.cpu().float(), ref, atol=2e-3)
    assert torch.equal(count.cpu().long(), ref_count.long())


@pytest.mark.parametrize("adapter", VERSIONS, ids=["1.0.0", "1.0.1"])
def test_models_that_raise_nothing_to_a_power_are_not_matched(adapter: Any) -> None:
    assert not adapter.matches(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    assert adapter.matches(Scaled())
    assert adapter.matches(causal_lm("llama"))  # its RMSNorm squares: matched, costs nothing

    class OnlyInInit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 8**-0.5

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    assert not computes_power(OnlyInInit)
    assert computes_power(Scaled)
    assert not integer_pow_v1_0_1.computes_power(OnlyInInit)
    assert integer_pow_v1_0_1.computes_power(Scaled)


@pytest.mark.parametrize(
    "build",
    [
        lambda: causal_lm("llama"),
        lambda: causal_lm("gpt2"),
        lambda: base_model("t5"),
        lambda: base_model("bert"),
        lambda: vision_model("vit"),
        Scaled,
    ],
    ids=["llama", "gpt2", "t5", "bert", "vit", "scaled"],
)
def test_1_0_1_finds_the_modules_1_0_0_finds(build: Any) -> None:
    model = build()
    first = adapter.targets(model)
    assert integer_pow_v1_0_1.adapter.targets(model) == first
    assert integer_pow_v1_0_1.adapter.targets(model) == first  # asked again: the kept answers


@pytest.mark.parametrize("adapter", VERSIONS, ids=["1.0.0", "1.0.1"])
def test_nothing_the_model_shows_changes_and_rollback_is_exact(adapter: Any) -> None:
    model = causal_lm("llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = model.config.to_dict()
    edit = apply(adapter, model)
    assert KIND in enabled(model)
    assert model.config.to_dict() == config
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    edit.rollback()
    assert KIND not in enabled(model)

    def probe(m: nn.Module) -> torch.Tensor:
        x, sizes = _inputs()
        return m(x, sizes)[0]

    assert_rollback_exact(adapter, _model(), probe)
