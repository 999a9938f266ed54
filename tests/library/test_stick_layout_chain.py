"""head-padding 2.6.0 and stick-align-padding 2.2: the rewrites of 2.5.0 and 2.1 in one
chained mode (``_stick_layout_chain``). The same rewrites in the same order: the device gives
bit-identical results with the new and the old versions, on models of several kinds and sizes
no adapter names; the CPU gives the stock model's; a call reaches only the modes that rewrite
its function."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    apply,
    assert_rollback_exact,
    base_model,
    causal_lm,
    greedy,
    prompt_logits,
    registry_where,
    vision_model,
)
from packaging.version import Version
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library import _stick_layout_chain
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.stick_align_v2_2 import stick_align_padding
from spyre_adapters.library.stick_layout_v2_6_0 import head_padding

_OLD = {"head-padding": Version("2.5.0"), "stick-align-padding": Version("2.1.0")}


_CHAINED = {"head-padding": Version("2.6.0"), "stick-align-padding": Version("2.2.0")}


def _upto(newest: dict[str, Version]) -> Any:
    """The built-in registry with ``newest`` the newest versions of those adapters."""
    return registry_where(lambda m: m.name not in newest or m.version <= newest[m.name])


def _older() -> Any:
    """The built-in registry with head-padding 2.5.0 and stick-align-padding 2.1.0 newest."""
    return _upto(_OLD)


def _chained() -> Any:
    """The built-in registry with head-padding 2.6.0 and stick-align-padding 2.2.0 newest
    (later versions are tested against these in their own files)."""
    return _upto(_CHAINED)


def _llama() -> nn.Module:  # one KV head, head_dim 8, hidden 40: every rewrite kind
    return causal_lm("llama", hidden_size=40, intermediate_size=72, num_attention_heads=5,
                     num_key_value_heads=1, head_dim=8)  # fmt: skip


def _bert() -> nn.Module:
    return base_model("bert", hidden_size=48, intermediate_size=80, num_attention_heads=6)


def _t5() -> nn.Module:
    return base_model("t5", d_model=40, d_ff=72, num_heads=5, d_kv=8)


def _vit() -> nn.Module:
    return vision_model("vit", hidden_size=48, intermediate_size=80, num_attention_heads=3)


_INPUTS: dict[str, Callable[[], dict[str, torch.Tensor]]] = {
    "llama": lambda: {"input_ids": PROMPT},
    "bert": lambda: {"input_ids": PROMPT},
    "t5": lambda: {"input_ids": PROMPT, "decoder_input_ids": PROMPT[:, :4]},
    "vit": lambda: {
        "pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    },
}
_BUILD = {"llama": _llama, "bert": _bert, "t5": _t5, "vit": _vit}


def _on_device(
    build: Callable[[], nn.Module], stack: str, registry: Any, inputs: dict[str, torch.Tensor]
) -> tuple[list[str], Any]:
    model = build()
    spyre_adapters.prepare(model, stack, registry=registry)
    names = sorted(f"{a.name} {a.version}" for a in spyre_adapters.applied(model))
    model = model.to("spyre")
    with torch.no_grad():
        out = model(**{k: v.to("spyre") for k, v in inputs.items()})
    return names, out[0].cpu()


def assert_bit_identical(
    family: str, stack: str, registries: tuple[Any, Any], renames: dict[str, str]
) -> None:
    """``family`` on the device gives the same results, bit for bit, with the adapters of the
    two registries, which apply the same adapters but for the versions ``renames`` maps."""
    inputs = _INPUTS[family]()
    with warnings.catch_warnings(), spyre_sim.use_stack(stack):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        old_names, old = _on_device(_BUILD[family], stack, registries[0], inputs)
        new_names, new = _on_device(_BUILD[family], stack, registries[1], inputs)
    assert new_names == [renames.get(n, n) for n in old_names]
    assert any(n.startswith(("head-padding", "stick-align-padding")) for n in new_names)
    assert torch.equal(new, old)


@pytest.mark.parametrize("stack", ["2026.09", "2026.05"])
@pytest.mark.parametrize("family", sorted(_BUILD))
def test_the_device_gives_the_separate_modes_results_bit_for_bit(family: str, stack: str) -> None:
    renames = {"head-padding 2.5.0": "head-padding 2.6.0",
               "stick-align-padding 2.1.0": "stick-align-padding 2.2.0"}  # fmt: skip
    assert_bit_identical(family, stack, (_older(), _chained()), renames)


def assert_same_greedy_decoding(registries: tuple[Any, Any]) -> None:
    """A one-KV-head Llama's prefill and decode steps on the device give the same tokens and
    logits, exactly, with the two registries' adapters."""
    results = []
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")
        for registry in registries:
            model = _llama()
            spyre_adapters.prepare(model, "2026.09", registry=registry)
            tokens, logits = greedy(model.to("spyre"), prompt=PROMPT.to("spyre"))
            results.append((tokens.cpu(), logits.cpu()))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])


def assert_stock_on_the_cpu_and_exact_rollback(adapter: Any, kind: str) -> None:
    """On the CPU the Llama adapted by ``adapter`` (enabling scoped-mode ``kind``) gives the
    stock values and state dict keys; rollback leaves no mode and is exact."""
    stock, model = _llama(), _llama()
    assert adapter.matches(model)
    edit = apply(adapter, model)
    assert kind in enabled(model)
    assert torch.equal(prompt_logits(model), prompt_logits(stock))
    assert model.state_dict().keys() == stock.state_dict().keys()
    edit.rollback()
    assert enabled(model) == {}
    assert_rollback_exact(adapter, _llama(), prompt_logits)


def test_greedy_generation_on_the_device_is_the_separate_modes_one() -> None:
    assert_same_greedy_decoding((_older(), _chained()))


@pytest.mark.parametrize("adapter", [head_padding, stick_align_padding], ids=["head", "align"])
def test_same_values_as_stock_on_the_cpu_and_rollback_is_exact(adapter: Any) -> None:
    assert_stock_on_the_cpu_and_exact_rollback(adapter, _stick_layout_chain.KIND)


def test_a_call_reaches_only_the_modes_that_rewrite_its_function() -> None:
    kinds = [link.kind for link in _stick_layout_chain.LINKS]
    settings = frozenset((kind, "sub-stick-head") for kind in kinds)
    chain = _stick_layout_chain._factory(settings)
    assert [type(m).__name__ for m in chain.modes] == [
        "CutWritesUnwrapped", "IntegerSizes", "IntHeadSplit", "IndexedCutWrites", "IndexedCuts",
        "StickFolds",
    ]  # fmt: skip

    def first(func: Any) -> str | None:
        hit = [i for i, rewrites in enumerate(chain.rewrites) if rewrites(func)]
        return type(chain.modes[hit[0]]).__name__ if hit else None

    assert first(torch.Tensor.dim) is None
    assert first(torch.Tensor.shape.__get__) is None
    assert first(torch.nn.functional.linear) is None  # stick-layout's own, outside the chain
    assert first(torch.Tensor.view) == "IntegerSizes"
    assert first(torch.Tensor.__getitem__) == "CutWritesUnwrapped"
    assert first(torch.Tensor.__setitem__) == "CutWritesUnwrapped"
    assert first(torch.Tensor.add_) == "CutWritesUnwrapped"
    assert first(torch.matmul) == "StickFolds"
    only = _stick_layout_chain._factory(frozenset({("stick-layout-folds", "stick-align")}))
    assert [type(m).__name__ for m in only.modes] == ["StickFolds"]


def test_bad_kinds_and_features_are_refused() -> None:
    model = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="not chainable"):
        _stick_layout_chain.enable(model, None, ["stick-layout"], "sub-stick-head")
    with pytest.raises(ValueError, match="unknown stick-layout feature"):
        _stick_layout_chain.enable(model, None, ["stick-layout-int"], "no-such-feature")
