"""The ``spyre`` device as PyTorch sees it: registration, factories, transfers, modules."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def test_registration_is_idempotent(spyre: ModuleType) -> None:
    spyre.register()
    spyre.register()
    assert torch._C._get_privateuse1_backend_name() == "spyre"
    assert torch.spyre.is_available()
    assert torch.spyre.device_count() == 1
    assert torch.spyre.current_device() == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(2, 64, dtype=torch.float16, device="spyre"),
        lambda: torch.zeros(2, 64, dtype=torch.float16, device="spyre"),
        lambda: torch.ones(2, 64, dtype=torch.float16, device="spyre"),
        lambda: torch.full((2, 64), 3.0, dtype=torch.float16, device="spyre"),
        lambda: torch.randn(2, 64, dtype=torch.float16, device="spyre"),
        lambda: torch.tensor([[1.0] * 64] * 2, dtype=torch.float16, device="spyre"),
    ],
)
def test_factories(spyre: ModuleType, make: object) -> None:
    t = make()  # type: ignore[operator]
    assert t.device.type == "spyre"
    assert t.shape == (2, 64)
    assert t.cpu().device.type == "cpu"


def test_factory_values_and_arange(spyre: ModuleType) -> None:
    assert torch.ones(3, dtype=torch.float16, device="spyre").cpu().tolist() == [1.0] * 3
    assert torch.full((2,), 3.0, dtype=torch.float16, device="spyre").tolist() == [3.0, 3.0]
    assert torch.arange(4, device="spyre").cpu().tolist() == [0, 1, 2, 3]


def test_to_and_back_and_print(spyre: ModuleType) -> None:
    host = torch.randn(3, 64).half()
    dev = host.to("spyre")
    assert dev.device == torch.device("spyre", 0)
    assert torch.equal(dev.cpu(), spyre.round_to_dl16(host))
    assert "device='spyre:0'" in repr(dev)
    assert dev.tolist() == spyre.round_to_dl16(host).tolist()


def test_device_mismatch_is_a_runtime_error(spyre: ModuleType) -> None:
    dev = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    with pytest.raises(RuntimeError, match=r"same device.*spyre:0 and cpu"):
        dev + torch.ones(2, 64, dtype=torch.float16)
    # a 0-dim CPU tensor is a scalar, allowed as on CUDA
    assert (dev + torch.tensor(1.0, dtype=torch.float16)).cpu()[0, 0].item() == 2.0


def test_model_to_then_half(spyre: ModuleType) -> None:
    with spyre.configure(numerics=False):  # keep fp32 on the device to see half() act
        model = torch.nn.Linear(64, 64).to("spyre")
        assert model.weight.device.type == "spyre"
        assert model.weight.dtype == torch.float32
        model.half()
        assert model.weight.dtype == torch.float16
        assert model.weight._host.dtype == torch.float16
        out = model(torch.ones(2, 64, dtype=torch.float16, device="spyre"))
    assert out.dtype == torch.float16


def test_assigning_data_replaces_shape_dtype_and_values(spyre: ModuleType) -> None:
    """``t.data = other`` (how Transformers' ``resize_token_embeddings`` swaps a weight in
    place): the device tensor reads ``other``'s values afterwards, not its old ones under the
    new shape."""
    weight = torch.nn.Parameter(torch.zeros(3, 2, dtype=torch.float16).to("spyre"))
    bigger = torch.arange(10, dtype=torch.float16).view(5, 2).to("spyre")
    weight.data = bigger
    assert weight.shape == weight.data.shape == (5, 2)
    assert torch.equal(weight.cpu(), torch.arange(10, dtype=torch.float16).view(5, 2))
    bigger.add_(1)  # the storage is shared, as on the host
    assert torch.equal(weight.cpu(), torch.arange(1, 11, dtype=torch.float16).view(5, 2))
    model = torch.nn.Embedding(4, 2).half().to("spyre")
    model.weight.data = model.weight.data[:3].clone()
    assert model.weight.cpu().shape == (3, 2)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        weight.data = torch.zeros(5, 2, dtype=torch.float16)  # a host tensor


def test_memory_allocated_counts_each_storage_once(spyre: ModuleType) -> None:
    before = torch.spyre.memory_allocated()
    t = torch.empty(1024, dtype=torch.float16, device="spyre")
    assert torch.spyre.memory_allocated() - before == 2048
    views = [t[:512], t.view(16, 64)]
    assert torch.spyre.memory_allocated() - before == 2048
    del t, views
    assert torch.spyre.memory_allocated() == before


def test_the_generic_accelerator_memory_api_answers_for_the_device(spyre: ModuleType) -> None:
    """``torch.accelerator``'s memory functions need a C++ DeviceAllocator a Python backend
    cannot register; libraries call them generically (accelerate 1.16 at each offloaded
    weight), so the device answers them as ``torch.spyre`` does instead of an internal assert."""
    assert torch.accelerator.current_accelerator() == torch.device("spyre")
    before = torch.accelerator.memory_allocated()
    t = torch.empty(1024, dtype=torch.float16, device="spyre")
    assert torch.accelerator.memory_allocated() - before == 2048
    assert torch.accelerator.memory.memory_reserved() == torch.spyre.memory_allocated()
    assert torch.accelerator.max_memory_allocated() >= before + 2048
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == before + 2048
    torch.accelerator.empty_cache()
    torch.accelerator.synchronize()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.reset_accumulated_memory_stats()
    del t
    assert torch.accelerator.memory_allocated() == before


def test_backward_is_refused(spyre: ModuleType) -> None:
    w = torch.nn.Parameter(torch.ones(64, 64, dtype=torch.float16).to("spyre"))
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    loss = (x @ w).sum()
    with pytest.raises(spyre.InferenceOnlyError, match="inference-only"):
        loss.backward()


def test_functional_autograd_is_refused_on_the_device_only(spyre: ModuleType) -> None:
    w = torch.nn.Parameter(torch.ones(64, 64, dtype=torch.float16).to("spyre"))
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    loss = (x @ w).sum()
    with pytest.raises(spyre.InferenceOnlyError, match=r"torch\.autograd\.grad\(\)"):
        torch.autograd.grad(loss, w)
    with pytest.raises(spyre.InferenceOnlyError, match=r"torch\.autograd\.backward\(\)"):
        torch.autograd.backward([loss])
    host = torch.ones(3, requires_grad=True)
    (g,) = torch.autograd.grad((host * 2).sum(), host)
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_autocast_on_the_device(spyre: ModuleType) -> None:
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    with torch.autocast("spyre", dtype=torch.float16):
        y = x + x
    assert y.cpu()[0, 0].item() == 2.0


def test_inference_mode_and_no_grad(spyre: ModuleType) -> None:
    model = torch.nn.Linear(64, 64).half().to("spyre")
    x = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    with torch.inference_mode():
        a = model(x).cpu()
    with torch.no_grad():
        b = model(x).cpu()
    assert torch.equal(a, b)


def test_views_of_normal_tensors_under_inference_mode(spyre: ModuleType) -> None:
    """A buffer made before ``inference_mode`` (a rotary embedding's ``inv_freq``) viewed inside
    it: a normal tensor, as on the host (it used to raise "Cannot set version_counter for
    inference tensor", so no Llama ran on the device under ``torch.inference_mode()``)."""
    module = torch.nn.Module()
    module.register_buffer("inv_freq", torch.arange(64, dtype=torch.float16), persistent=False)
    module.to("spyre")
    with torch.inference_mode():
        view = module.inv_freq[None, :, None].expand(2, -1, 1)
        made_inside = torch.ones(64, dtype=torch.float16, device="spyre")[None]
        pieces = module.inv_freq.view(1, 64).expand(2, 64).unbind(0)
    assert not view.is_inference()
    assert made_inside.is_inference()
    assert not any(p.is_inference() for p in pieces)
    assert torch.equal(view.cpu()[1, :, 0], torch.arange(64, dtype=torch.float16))
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1, vocab_size=128,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval().half()
    ids = torch.tensor([[1, 5, 9, 3]])
    with torch.no_grad():
        expected = model(ids).logits
    model.to("spyre")
    with spyre.configure(layout_checks=False), torch.inference_mode():
        logits = model(ids.to("spyre")).logits.cpu()
    assert torch.allclose(logits.float(), expected.float(), atol=0.05, rtol=0.05)


def test_in_place_and_out_return_the_written_tensor(spyre: ModuleType) -> None:
    a = torch.ones(4, 64, dtype=torch.float16, device="spyre")
    out = torch.empty(4, 64, dtype=torch.float16, device="spyre")
    assert torch.add(a, a, out=out) is out
    assert out.cpu()[0, 0].item() == 2.0
    b = a.clone()
    assert b.add_(1) is b
    assert b.cpu()[0, 0].item() == 2.0


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_factories_filled_by_a_resizing_out_op_have_their_shape(
    spyre: ModuleType, context: Any
) -> None:
    # arange/linspace create an empty tensor and resize it in an out= op: the tensor the
    # caller gets must have the shape, not only the host behind it (Pixtral's meshgrid)
    with context():
        steps = torch.arange(4, device="spyre")
        assert steps.shape == (4,)
        assert torch.arange(1, 7, 2, device="spyre").shape == (3,)
        assert torch.linspace(0, 1, 5, device="spyre").shape == (5,)
        rows, cols = torch.meshgrid(steps, torch.arange(3, device="spyre"), indexing="ij")
        assert rows.shape == cols.shape == (4, 3)
        assert rows.cpu().tolist() == torch.arange(4).unsqueeze(1).expand(4, 3).tolist()
        out = torch.empty(0, dtype=torch.float16, device="spyre")
        assert torch.add(torch.ones(2, 3, dtype=torch.float16, device="spyre"), 1, out=out) is out
        assert out.shape == (2, 3)
        assert out.cpu().tolist() == [[2.0] * 3] * 2


def test_resize_keeps_the_leading_values_even_after_rounding(spyre: ModuleType) -> None:
    # DL16 rounding runs on a NumPy view, after which PyTorch will not resize the storage
    x = torch.arange(6, dtype=torch.float16).reshape(2, 3).to("spyre") * 1
    assert x.resize_(4) is x
    assert x.shape == (4,)
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    x.resize_(2, 5)
    assert x.shape == (2, 5)
    assert x.cpu()[0, :4].tolist() == [0.0, 1.0, 2.0, 3.0]
    fresh = torch.empty(3, dtype=torch.float16, device="spyre")
    fresh.resize_(5)
    assert fresh.shape == (5,)


def test_device_warnings_point_at_the_callers_line(spyre: ModuleType) -> None:
    from spyre_sim.state import device_state

    device_state.forget_warnings()
    with pytest.warns(spyre.SpyreDowncastWarning) as caught:
        torch.tensor([0.5, 1.5]).to("spyre")  # the line a user would want to see
    assert [w.filename for w in caught] == [__file__]
    x = torch.ones(4, 64, dtype=torch.float16, device="spyre")
    with spyre.use_stack("2026.05"), pytest.warns(spyre.SpyreFallbackWarning) as caught:
        x.cumsum(0)
    assert [w.filename for w in caught] == [__file__]


def test_a_tensor_built_from_device_scalars(spyre: ModuleType) -> None:
    """``torch.tensor([...])`` of 0-dim device tensors reads each one below the Python key (as
    Qwen2-VL's rope index does): the read gets the verdict of ``item()`` (gap ``host-sync``)."""
    a = torch.tensor(3).to("spyre")
    b = a + 1
    with spyre.telemetry.record() as rec:
        on_device = torch.tensor([a, b], device="spyre")
        on_host = torch.tensor([a, b])
    assert on_device.device.type == "spyre"
    assert on_device.cpu().tolist() == [3, 4]
    assert on_host.tolist() == [3, 4]
    assert rec.snapshot.to_json()["ops"]["aten._local_scalar_dense.default"] == {"cpu-fallback": 4}
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as info:
        torch.tensor([a, b])
    assert info.value.gap == "host-sync"
