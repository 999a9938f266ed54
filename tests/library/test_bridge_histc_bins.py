"""bridge-histc 2.1.0: ``histc`` computed on the host, because the rewrite 2.0.0 uses is not
exact on the device beyond a few dozen bins.

Transformers' grouped-matmul expert layers count the tokens of each expert with
``histc(expert_ids, bins=E, min=0, max=E - 1)``. The rewrite computes each element's bin with
the CPU kernel's formula ``floor(x * E / (E - 1))`` in the device's 16-bit float: for
``x = 62, E = 64`` that is 62.98, which DL16 (spacing 0.125 there) stores as 63, so expert 62's
token is counted in expert 63's group and the grouped matmul gives it expert 63's weights. It
was validated only at the tester configurations' four experts; OLMoE has 64, Qwen3-MoE 128,
DeepSeek-V3 256. 2.1.0 was generated (``.ci/generate_bridges.py --samples``) from the call
this file's OLMoE test makes with 64 experts, where the rewrite fails and the host holds.

The sample was captured from :func:`test_olmoe_with_64_experts_under_the_plugin`, run as
``pytest --spyre --spyre-lock LOCK --spyre-capture-bridges DIR`` with a lock (``spyre-adapters
pin``) that leaves bridge-histc out, so that the device refuses the call."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import PROMPT, causal_lm

import spyre_adapters
import spyre_sim
from spyre_adapters.library._op_rewrites import histc as rewrite


def _counts_on_device(experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.arange(experts, dtype=torch.int32)
    got = rewrite(ids.to("spyre"), bins=experts, min=0, max=experts - 1).cpu().float()
    return got, torch.histc(ids.float(), bins=experts, min=0, max=experts - 1)


def _olmoe_64() -> torch.nn.Module:
    return causal_lm("olmoe", hidden_size=64, intermediate_size=32, num_attention_heads=4,
                     num_key_value_heads=4, head_dim=16, num_experts=64, num_experts_per_tok=8)  # fmt: skip


def test_the_rewrite_miscounts_on_the_device_from_34_bins() -> None:
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")
        exact = [e for e in range(2, 65) if torch.equal(*_counts_on_device(e))]
    assert exact == list(range(2, 34)), "the evidence for 2.1.0 changed: look again"


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])
def test_olmoe_with_64_experts_counts_its_tokens_as_the_cpu(stack: str) -> None:
    """OLMoE's own 64 experts, eight per token: the device's expert counts (the histc the
    expert layer computes) are the CPU's, and the logits agree with the CPU's."""
    model = _olmoe_64()
    counts: list[list[torch.Tensor]] = [[], []]
    stock_histc = torch.histc

    def recording(side: int) -> object:
        def histc(values: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            out = stock_histc(values, *args, **kwargs)  # type: ignore[arg-type]
            counts[side].append(out.cpu().float())
            return out

        return histc

    with torch.no_grad():
        torch.histc = recording(0)  # type: ignore[assignment]
        try:
            expected = model(input_ids=PROMPT).logits
        finally:
            torch.histc = stock_histc
    with warnings.catch_warnings(), spyre_sim.use_stack(stack), torch.no_grad():
        warnings.simplefilter("ignore")
        spyre_adapters.prepare(model, stack)
        model = model.to("spyre")
        torch.histc = recording(1)  # type: ignore[assignment]
        try:
            got = model(input_ids=PROMPT.to("spyre")).logits.cpu().float()
        finally:
            torch.histc = stock_histc
    assert counts[0], "the expert layer computed no histc"
    assert len(counts[0]) == len(counts[1])
    for cpu, device in zip(*counts, strict=True):
        assert torch.equal(cpu, device)
    torch.testing.assert_close(got, expected, rtol=0.05, atol=0.05)


def test_olmoe_with_64_experts_under_the_plugin(request: pytest.FixtureRequest) -> None:
    """The same model placed by ``pytest --spyre``, which prepares it with the adapters the
    run resolves (or a lock pins); skipped without the plugin."""
    if not request.config.getoption("spyre", default=False):
        pytest.skip("runs under pytest --spyre, which prepares the model it places")
    model = _olmoe_64()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        expected = model(input_ids=PROMPT).logits
        got = model.to("spyre")(input_ids=PROMPT.to("spyre")).logits.cpu().float()
    torch.testing.assert_close(got, expected, rtol=0.05, atol=0.05)
