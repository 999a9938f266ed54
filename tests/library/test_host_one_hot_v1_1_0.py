"""host-one-hot 1.1.0: also forwards that reach ``one_hot`` through helper functions of their
module (LongT5's transient-global attention), which 1.0.0 did not select."""

from __future__ import annotations

import warnings

import torch
from library_models import apply, assert_rollback_exact, base_model

import spyre_adapters
import spyre_sim
from spyre_adapters import default_registry
from spyre_adapters.library.host_one_hot import adapter as adapter_1_0_0
from spyre_adapters.library.host_one_hot_v1_1_0 import adapter, reaches_one_hot

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11, 3, 9, 21, 4, 8]])
LONGT5 = {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4,
          "d_kv": 16, "vocab_size": 99, "local_radius": 5, "global_block_size": 3,
          "encoder_attention_type": "transient-global"}  # fmt: skip


def _helper(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, 5)


def _outer(x: torch.Tensor) -> torch.Tensor:
    return _helper(x) * 2


def _unrelated(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.relu(x)


def test_reaches_one_hot_through_module_functions_only_as_deep_as_asked() -> None:
    assert reaches_one_hot(_outer)
    assert not reaches_one_hot(_outer, depth=0)
    assert reaches_one_hot(_outer, depth=1)
    assert not reaches_one_hot(_unrelated)


def _longt5() -> torch.nn.Module:
    return base_model("longt5", **LONGT5)


def _hidden(model: torch.nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        ids = IDS.to(device)
        out = model(input_ids=ids, decoder_input_ids=ids[:, :5])
    return out.last_hidden_state


def test_longt5_is_selected_by_1_1_0_only_and_keeps_its_outputs() -> None:
    assert not adapter_1_0_0.matches(_longt5())
    stock, adapted = _longt5(), _longt5()
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert torch.equal(_hidden(adapted), _hidden(stock))


def test_rollback_restores_the_model_exactly() -> None:
    assert_rollback_exact(adapter, _longt5(), _hidden)


def test_longt5_runs_on_the_device_and_matches() -> None:
    reference = _hidden(_longt5())
    model = _longt5()
    spyre_adapters.prepare(model, "2026.09")
    applied = {(a.name, str(a.version)) for a in spyre_adapters.applied(model)}

    def newest(name: str) -> str:
        return str(max(m.version for m in default_registry().manifests() if m.name == name))

    # the newest host-one-hot is applied; every version from 1.1.0 on selects LongT5
    assert {
        ("host-one-hot", newest("host-one-hot")),
        ("head-padding", newest("head-padding")),
    } <= applied
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        on_device = model.half().to("spyre")
        with spyre_sim.use_stack("2026.09"):
            out = _hidden(on_device, "spyre").cpu().float()
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert cosine > 0.99
