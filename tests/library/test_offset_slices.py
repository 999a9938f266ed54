"""fused-projection-split 2.x: cuts at an offset inside a stick as selection matmuls while the
release refuses them; the model keeps its fused projections (state dict keys)."""

from __future__ import annotations

import pytest
import torch
from library_models import causal_lm

import spyre_adapters
import spyre_sim
from pytest_spyre.policy import apply_policy

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

MODELS = {
    "gpt2": lambda: causal_lm("gpt2", n_embd=32, n_head=4, vocab_size=99),
    "bloom": lambda: causal_lm("bloom", hidden_size=32, n_head=4, vocab_size=99),
}  # fmt: skip
IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_runs_at_a_release_that_refuses_offset_cuts_and_keeps_the_state_dict(name: str) -> None:
    reference = MODELS[name]()
    with torch.no_grad():
        expected = reference(input_ids=IDS).logits.float()
    keys = list(reference.state_dict())
    # ops the release has no kernel for run on the host, as --spyre-unsupported=fallback does:
    # the layout rules (offset-slice among them) stay
    release = apply_policy(spyre_sim.builtin_catalogue().release("2026.05"), "fallback")
    with spyre_sim.use_stack(release), torch.no_grad():
        assert spyre_sim.current_stack().gap_open("offset-slice")
        with pytest.raises(spyre_sim.SpyreLayoutError):
            MODELS[name]().to("spyre")(input_ids=IDS.to("spyre"))
        model = MODELS[name]()
        spyre_adapters.prepare(model, "2026.05")
        versions = {a.name: a.version for a in spyre_adapters.applied(model)}
        assert versions["fused-projection-split"].major == 2
        assert list(model.state_dict()) == keys
        got = model.to("spyre")(input_ids=IDS.to("spyre")).logits.cpu().float()
    cosine = torch.nn.functional.cosine_similarity(got.flatten(), expected.flatten(), dim=0)
    assert float(cosine) > 0.99


def test_kept_while_packed_views_are_misread_and_retired_after() -> None:
    # 2026.06 lowers offset cuts, but copies and attentions misread packed views until 2026.09
    for release, kept in (("2026.06", True), ("2026.08", True), ("2026.09", False)):
        model = MODELS["gpt2"]()
        spyre_adapters.prepare(model, release)
        assert ("fused-projection-split" in {a.name for a in spyre_adapters.applied(model)}) is kept
