"""host-one-hot 1.2.0: also decorated forwards that reach ``one_hot`` through helper functions of
their module (the MoE auxiliary loss of OLMoE, Mixtral, Qwen3-MoE, ...), which 1.1.0 missed."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, causal_lm, decorated, device_runs
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.host_one_hot_v1_1_0 import adapter as adapter_1_1_0
from spyre_adapters.library.host_one_hot_v1_1_0 import reaches_one_hot as reaches_1_1_0
from spyre_adapters.library.host_one_hot_v1_2_0 import adapter, reaches_one_hot

IDS = torch.tensor([[5, 17, 42, 98, 7, 63, 11, 3, 9], [21, 4, 8, 33, 2, 71, 6, 14, 50]])


def _helper(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, 5)


def _outer(x: torch.Tensor) -> torch.Tensor:
    return _helper(x) * 2


def _forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return _outer(x)


def test_reaches_one_hot_through_a_decorator_wrapper_that_lives_elsewhere() -> None:
    # the wrapper's module (library_models) names neither helper: only its closure leads on
    wrapped: Any = decorated(_forward)
    assert not reaches_1_1_0(wrapped)
    assert reaches_one_hot(wrapped)
    assert reaches_one_hot(_forward)
    assert not reaches_one_hot(wrapped, depth=1)  # _forward -> _outer -> _helper: two calls
    assert reaches_one_hot(wrapped, depth=2)


class _Router(nn.Module):
    """A module whose decorated forward reaches ``one_hot`` through helpers of its module, as
    Transformers' MoE language models compute their auxiliary loss."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 5))

    forward = decorated(lambda self, x: (_outer(x % 5).to(self.scale.dtype) * self.scale).sum(-1))


def _router() -> nn.Module:
    return _Router().eval()


def test_a_decorated_forward_is_selected_by_1_2_0_only_and_keeps_its_outputs() -> None:
    assert not adapter_1_1_0.matches(_router())
    stock, adapted = _router(), _router()
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    with torch.no_grad():
        assert torch.equal(adapted(IDS), stock(IDS))


def test_rollback_restores_the_model_exactly() -> None:
    def probe(model: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return model(IDS)

    assert_rollback_exact(adapter, _router(), probe)


def test_the_decorated_forward_runs_on_the_device_and_matches() -> None:
    with torch.no_grad():
        reference = _router()(IDS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped, out = device_runs(_router, (IDS,), "host-one-hot", "2026.09")
    assert isinstance(stopped, spyre_sim.SpyreLoweringError)
    assert stopped.gap == "int64-storage"
    assert torch.allclose(out.cpu().float(), reference, rtol=1e-2)


def _olmoe() -> nn.Module:
    return causal_lm("olmoe", num_experts=4, num_experts_per_tok=2, output_router_logits=True)


def _aux_loss_uses_one_hot() -> bool:
    """Transformers 5.15's ``load_balancing_loss_func`` builds its expert mask with ``one_hot``;
    later releases count tokens per expert without it."""
    from transformers.models.olmoe import modeling_olmoe

    return reaches_one_hot(modeling_olmoe.load_balancing_loss_func, depth=0)


def _loss_and_logits(model: nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        out = model(input_ids=IDS.to(device))
    return torch.cat([out.aux_loss.reshape(1).float().cpu(), out.logits.float().cpu().flatten()])


def test_the_aux_loss_of_olmoe_runs_on_the_device_where_it_uses_one_hot() -> None:
    if not _aux_loss_uses_one_hot():
        pytest.skip("this Transformers computes the MoE auxiliary loss without one_hot")
    model = _olmoe()
    assert id(model) not in {id(m) for m, _ in adapter_1_1_0.targets(model)}
    assert id(model) in {id(m) for m, _ in adapter.targets(model)}
    stock, adapted = _olmoe(), _olmoe()
    apply(adapter, adapted)
    reference = _loss_and_logits(stock)
    assert torch.equal(_loss_and_logits(adapted), reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stopped, out = device_runs(_olmoe, (IDS,), "host-one-hot", "2026.09")
    assert isinstance(stopped, spyre_sim.SpyreLoweringError)
    assert stopped.gap == "int64-storage"
    on_device = torch.cat(
        [out.aux_loss.reshape(1).float().cpu(), out.logits.float().cpu().flatten()]
    )
    assert abs(on_device[0] - reference[0]) < 0.02 * abs(reference[0])
    cosine = torch.nn.functional.cosine_similarity(on_device[1:], reference[1:], dim=0)
    assert cosine > 0.99
    prepared = _olmoe()
    spyre_adapters.prepare(prepared, "2026.09")
    applied = {(a.name, str(a.version)) for a in spyre_adapters.applied(prepared)}
    assert ("host-one-hot", "1.2.0") in applied
