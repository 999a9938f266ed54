"""host-position-bias, every version: the stock numbers, an exact rollback, no match without a
relative bias table; what 1.1.0 changes: the table the attention module holds at each call
(1.0.0 kept the table of prepare time); what 1.2.0 changes: an offloaded table is read through
its accelerate hook."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    base_model,
    causal_lm,
    cosine,
    every_version,
    families,
    last_hidden,
)

from spyre_adapters.contract import Adapter
from spyre_adapters.library.host_position_bias import adapter as adapter_1_0_0
from spyre_adapters.library.host_position_bias_v1_1_0 import adapter
from spyre_adapters.library.host_position_bias_v1_2_0 import adapter as adapter_1_2_0

VERSIONS: dict[str, Adapter] = every_version("host-position-bias")
CASES = [(v, t) for v in VERSIONS for t in families("host-position-bias", v)]
INPUTS = {"input_ids": PROMPT, "decoder_input_ids": PROMPT[:, :4]}


@pytest.mark.parametrize(("version", "model_type"), CASES)
def test_same_hidden_states_as_stock(version: str, model_type: str) -> None:
    stock, adapted = adapted_pair(VERSIONS[version], base_model, model_type)
    ref = last_hidden(stock, **INPUTS)
    out = last_hidden(adapted, **INPUTS)
    assert cosine(out, ref) >= 0.9999
    assert torch.allclose(out, ref, atol=1e-6)


@pytest.mark.parametrize(
    ("version", "from_now"), [(adapter_1_0_0, False), (adapter, True), (adapter_1_2_0, True)]
)
def test_the_bias_is_built_on_the_host(version: Adapter, from_now: bool) -> None:
    """Both look the buckets up on the host, never through the module's own table forward;
    1.0.0 in the table of prepare time, 1.1.0 in the table as it is."""
    model = base_model("t5")
    attention = model.encoder.block[0].layer[0].SelfAttention
    apply(version, model)
    calls: list[Any] = []
    table = attention.relative_attention_bias
    table.register_forward_hook(lambda *_: calls.append(1))
    bias = attention.compute_bias(5, 5, device=torch.device("cpu"))
    assert bias.shape == (1, 4, 5, 5)
    assert calls == []
    with torch.no_grad():
        table.weight.zero_()
    assert bool(torch.count_nonzero(attention.compute_bias(5, 5)) == 0) is from_now


@pytest.mark.parametrize(
    ("version", "uses_it"), [(adapter_1_0_0, False), (adapter, True), (adapter_1_2_0, True)]
)
def test_a_table_loaded_after_apply_reaches_the_attention(version: object, uses_it: bool) -> None:
    """What 1.1.0 fixes: 1.0.0 looked buckets up in the table of prepare time."""
    stock, adapted = base_model("t5"), base_model("t5")
    apply(version, adapted)  # type: ignore[arg-type]
    state = copy.deepcopy(stock.state_dict())
    generator = torch.Generator().manual_seed(7)
    for key, tensor in state.items():
        if key.endswith("relative_attention_bias.weight"):
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * 4)
    stock.load_state_dict(state)
    adapted.load_state_dict(state)
    ref = last_hidden(stock, **INPUTS)
    out = last_hidden(adapted, **INPUTS)
    assert torch.allclose(out, ref, atol=1e-6) is uses_it


@pytest.mark.parametrize("version", list(VERSIONS))
def test_rollback_restores_the_model_exactly(version: str) -> None:
    def probe(m: torch.nn.Module) -> torch.Tensor:
        return last_hidden(m, **INPUTS)

    model = base_model("t5")
    assert_rollback_exact(VERSIONS[version], model, probe)
    assert "compute_bias" not in model.encoder.block[0].layer[0].SelfAttention.__dict__


@pytest.mark.parametrize("version", list(VERSIONS))
def test_does_not_match_models_without_relative_bias(version: str) -> None:
    assert not VERSIONS[version].matches(causal_lm("llama"))
    assert not VERSIONS[version].matches(base_model("bert"))


@pytest.mark.parametrize(("version", "reads_it"), [(adapter, False), (adapter_1_2_0, True)])
def test_an_offloaded_table_is_brought_in_by_its_hook(version: Adapter, reads_it: bool) -> None:
    """What 1.2.0 fixes: under accelerate's offloading the table is on ``meta`` outside its own
    forward, which the adapter never calls; 1.1.0 read it there and failed."""
    accelerate = pytest.importorskip("accelerate")
    stock, adapted = base_model("t5"), base_model("t5")
    adapted.load_state_dict(stock.state_dict())
    apply(version, adapted)
    accelerate.cpu_offload(adapted, execution_device="cpu")
    assert adapted.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.is_meta
    if not reads_it:
        with pytest.raises(NotImplementedError, match="meta tensor"):
            last_hidden(adapted, **INPUTS)
        return
    assert torch.allclose(last_hidden(adapted, **INPUTS), last_hidden(stock, **INPUTS), atol=1e-6)
