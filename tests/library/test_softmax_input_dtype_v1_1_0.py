"""``softmax-input-dtype`` 1.1: 1.0's mode for tensors off the host only.

Host tensors are cast as asked under 1.1 (1.0 dropped their upcasts too); device tensors'
upcasts and the softmax ``dtype=torch.float32`` are still dropped. A forward that calls
softmax after a host convolution (``host-patch-embed``'s 1x1 convolution, SuperPoint's head)
failed on the device at 2026.05 with 1.0 (``conv2d`` refused a half input with float32
weights) and matches the CPU with 1.1. Greedy tokens of the 1.0 families are the stock ones."""

from __future__ import annotations

import pytest
import torch
from library_models import adapted_pair, assert_same_greedy, causal_lm, families, registry_where
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.softmax_input_dtype import InputDtypeSoftmaxMode
from spyre_adapters.library.softmax_input_dtype_v1_1_0 import DeviceInputDtypeSoftmaxMode, adapter
from spyre_adapters.registry import Registry

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.SpyreSimWarning")


def test_host_tensors_are_cast_as_asked() -> None:
    x = torch.randn(2, 64).half()
    with InputDtypeSoftmaxMode():
        assert x.to(torch.float32).dtype is torch.float16  # 1.0: dropped on the host too
    with DeviceInputDtypeSoftmaxMode():
        assert x.to(torch.float32).dtype is torch.float32
        assert x.float().dtype is torch.float32
        assert torch.softmax(x, -1, dtype=torch.float32).dtype is torch.float32


def test_device_tensors_still_stay_at_their_dtype() -> None:
    x = torch.randn(2, 64).half().to("spyre")
    with DeviceInputDtypeSoftmaxMode():
        assert x.to(torch.float32) is x
        assert x.float() is x
        assert torch.softmax(x, -1, dtype=torch.float32).dtype is torch.float16


class ScoreHead(nn.Module):
    """SuperPoint's keypoint head: a 1x1 convolution, then a softmax over its channels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(64, 65, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).softmax(1)


def _registry(version: str) -> Registry:
    """Every built-in adapter, softmax-input-dtype in ``version`` only, host-patch-embed in
    1.0.0 (whose ``.to(weight.dtype)`` 1.0 dropped; 1.1.0 casts to float64, which it keeps)."""
    return registry_where(
        lambda m: (
            (m.name != "softmax-input-dtype" or str(m.version) == version)
            and (m.name != "host-patch-embed" or str(m.version) == "1.0.0")
        )
    )


def test_a_host_convolution_inside_a_softmax_forward_runs_on_the_device() -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 64, 4, 4)
    with torch.no_grad():
        torch.manual_seed(1)
        ref = ScoreHead().eval()(x)
        results = {}
        with spyre_sim.use_stack("2026.05"):
            for version in ("1.0.0", "1.1.0"):
                torch.manual_seed(1)
                model = ScoreHead().eval()  # prepared on the host: float32 host weights
                spyre_adapters.prepare(model, "2026.05", registry=_registry(version))
                model = model.to("spyre")
                names = {f"{a.name} {a.version}" for a in spyre_adapters.applied(model)}
                assert {f"softmax-input-dtype {version}", "host-patch-embed 1.0.0"} <= names
                try:
                    results[version] = model(x.to("spyre")).cpu().float()
                except RuntimeError as error:
                    results[version] = error
    assert isinstance(results["1.0.0"], RuntimeError)
    assert "should be the same" in str(results["1.0.0"])
    out = results["1.1.0"]
    assert isinstance(out, torch.Tensor)
    assert torch.allclose(out, ref, atol=2e-3)


@pytest.mark.parametrize("model_type", families("softmax-input-dtype", "1.1.0"))
def test_same_greedy_tokens_as_stock(model_type: str) -> None:
    stock, adapted = adapted_pair(
        adapter, lambda t: causal_lm(t, attn_implementation="eager"), model_type
    )
    assert_same_greedy(stock, adapted, atol=0.0)  # fp32: the mode changes nothing
