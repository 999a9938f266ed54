"""einsum-pieces 1.2.0: 1.1's pieces, also for an einsum in a module-level helper the forward
calls (Transformers 5.25's Mamba2 chunk scan, which Bamba, Falcon-H1, GraniteMoeHybrid,
Nemotron-H and Zamba2 share), followed through plain functions and through the module objects
the ``kernels`` package makes of decorated functions. 1.1 does not see such an einsum and the
device stops at ``sub-stick-head``; 1.2 runs it and matches the CPU. On the CPU the adapted
model is the stock one (values to rounding, state dict, config), a model without einsum is not
matched, the depth limit holds, rollback is exact."""

from __future__ import annotations

import types
import warnings
from typing import Any

import pytest
import torch
from library_models import PROMPT, assert_stops_then_runs, causal_lm
from test_einsum_pieces import (
    assert_adapted_is_stock,
    assert_exact_rollback,
    assert_not_matched_without_einsum,
    assert_xlnet_is_stock,
)
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.einsum_pieces_v1_1_0 import adapter as v1_1
from spyre_adapters.library.einsum_pieces_v1_2_0 import DEPTH, adapter, reaches
from spyre_adapters.library.stick_layout_v2_6_0 import head_padding


def _scores(queries: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
    """A module-level helper computing an einsum, as Mamba2's chunk scan does."""
    return torch.einsum("bqc,bchw->bqhw", queries, pixels)


def _through(queries: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
    return _scores(queries, pixels)  # the einsum two calls below the forward


def _as_module(fn: Any) -> nn.Module:
    """What the ``kernels`` package makes of a hub-decorated function: a module object whose
    forward calls the function held in its closure."""

    class Func(nn.Module):
        def forward(self, *args: Any) -> Any:
            return fn(*args)

    return Func()


_kernel_scores = _as_module(_through)


class HelperDecoder(nn.Module):
    """Query embeddings against a 32 x 32 map, the einsum in a helper (``via``: ``"function"``
    or ``"kernel"``, a module object held as a module global)."""

    def __init__(self, via: str = "function") -> None:
        super().__init__()
        self.embed = nn.Linear(64, 64)
        self.via = via

    def forward(self, queries: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
        if self.via == "kernel":
            return _kernel_scores(self.embed(queries), pixels)  # type: ignore[no-any-return]
        return _through(self.embed(queries), pixels)


def _inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(2, 5, 64, generator=generator)
    pixels = torch.randn(2, 64, 32, 32, generator=generator)  # a 32 x 32 map: 1024 wide
    return queries.to(device), pixels.to(device)


def _decoder(via: str = "function") -> HelperDecoder:
    torch.manual_seed(0)
    return HelperDecoder(via).eval()


@pytest.mark.parametrize("via", ["function", "kernel"])
def test_an_einsum_in_a_helper_is_matched_by_1_2_only(via: str) -> None:
    assert not v1_1.matches(_decoder(via))
    assert adapter.matches(_decoder(via))


@pytest.mark.parametrize("via", ["function", "kernel"])
def test_on_the_device_the_helper_einsum_runs_only_with_1_2(via: str) -> None:
    assert_stops_then_runs(lambda: _decoder(via), _inputs, [head_padding], [head_padding, adapter])


def test_the_adapted_decoder_is_the_stock_one_on_the_cpu() -> None:
    assert_adapted_is_stock(adapter, _decoder, _inputs)


def test_xlnet_is_the_stock_model_on_the_cpu() -> None:
    assert_xlnet_is_stock(adapter)


def test_helpers_are_followed_down_to_the_depth_limit_only() -> None:
    def chain(levels: int) -> types.FunctionType:
        """A function ``levels`` global calls above one that names einsum."""
        namespace: dict[str, Any] = {"torch": torch}
        exec("def f0(x):\n    return torch.einsum('ij,jk->ik', x, x)\n", namespace)
        for i in range(1, levels + 1):
            exec(f"def f{i}(x):\n    return f{i - 1}(x)\n", namespace)
        return namespace[f"f{levels}"]  # type: ignore[no-any-return]

    assert reaches(chain(DEPTH), "einsum")
    assert not reaches(chain(DEPTH + 1), "einsum")
    # torch's own functions are not followed: a forward calling torch.matmul reaches no einsum
    assert not reaches(nn.Linear.forward, "einsum")


def test_a_model_without_einsum_is_not_matched() -> None:
    assert_not_matched_without_einsum(adapter)


def test_rollback_is_exact() -> None:
    assert_exact_rollback(adapter, _decoder(), _decoder("kernel"), inputs=_inputs)


def _mamba2() -> nn.Module:  # heads of 16, state 16: the scan's einsum splits 256 into 16 x 16
    return causal_lm("mamba2", hidden_size=64, num_heads=8, head_dim=16, state_size=16,
                     n_groups=1, expand=2, num_hidden_layers=2)  # fmt: skip


def test_mamba2_with_heads_of_16_runs_on_the_device_as_on_the_cpu() -> None:
    """The model that showed the gap, prepared from the built-in registry as users do. Its
    einsums exist from Transformers 5.25 on (earlier versions scan without einsum)."""
    model = _mamba2()
    mixer = type(model.get_submodule("backbone.layers.0.mixer"))
    if not v1_1.matches(model) and not adapter.matches(model):
        pytest.skip("this Transformers' Mamba2 computes its scan without einsum")
    with torch.no_grad():
        expected = model(input_ids=PROMPT).logits
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")
        spyre_adapters.prepare(model, "2026.09")
        assert "einsum-pieces" in {a.name for a in spyre_adapters.applied(model)}, mixer
        out = model.to("spyre")(input_ids=PROMPT.to("spyre")).logits.cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=0.05, atol=0.05)  # DL16 through two layers
