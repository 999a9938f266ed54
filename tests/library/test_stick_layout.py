"""stick-align-padding 2.x and head-padding 2.x: stick-aligned forms computed inside forwards.

Each rewrite gives the stock result exactly (0/1 placement and selection matrices, zero
padding along K); models keep every output shape, cache, parameter and state dict entry; the
device refuses the stock model's shapes and runs the adapted one, matching the CPU.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import apply, base_model, causal_lm, config_for, randomize, state_snapshot

import spyre_sim
from spyre_adapters.library import _scoped_modes
from spyre_adapters.library._stick_folds import StickFolds, folds_to_mm
from spyre_adapters.library._stick_layout import (
    StickLayout,
    padded_matmul,
    select_columns,
    split_heads,
)
from spyre_adapters.library.stick_layout import head_padding, stick_align_padding

ALL = frozenset({"stick-align", "sub-stick-head", "offset-slice"})
# Transformers' tester sizes: nothing a whole number of sticks
TESTER = {"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 99}  # fmt: skip


def _seeded(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- the rewrites, one by one ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [((3, 5, 37), (37, 11)), ((91, 32), (32, 256)), ((32, 2), (4, 2, 7))],
    ids=["3d@2d", "2d@2d", "2d@3d"],
)
def test_padded_matmul_is_the_matmul(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    x, w = _seeded(*a), _seeded(*b, seed=1)
    assert torch.allclose(padded_matmul(x, w), x @ w, atol=1e-6)


def test_a_batched_outer_product_that_folds_into_mm_is_padded_on_the_device() -> None:
    """``[B, F, 1] @ [1, 1, L]`` (Parakeet's relative positions) folds into one ``mm`` with a
    reduction dim of 1: refused by the device's stick-align rule, missed by ``stick-layout``
    (``stick-align-padding`` 2.0), padded by ``stick-layout-folds`` (2.1), exact."""
    a, b = _seeded(3, 16, 1), _seeded(1, 1, 9, seed=1)
    stock = a @ b
    with spyre_sim.use_stack("2026.09"):
        da, db = a.half().to("spyre"), b.half().to("spyre")
        with pytest.raises(spyre_sim.SpyreLayoutError, match="reduction dim K=1"):
            da @ db
        with StickLayout(frozenset({"stick-align"})):
            with pytest.raises(spyre_sim.SpyreLayoutError, match="reduction dim K=1"):
                da @ db
            with StickFolds(frozenset({"stick-align"})):
                out = (da @ db).cpu().float()
                assert torch.equal(torch.matmul(da, db).cpu().float(), out)
    assert out.shape == stock.shape
    assert torch.allclose(out, stock, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize(
    ("a", "b", "mm"),
    [((13, 128, 1), (1, 1, 255), True), ((13, 128, 32), (32, 40), True),
     ((3, 128, 32), (3, 32, 40), False), ((2, 13, 128, 1), (1, 1, 1, 255), False), ((5,), (5,), False)],
)  # fmt: skip
def test_which_matmuls_fold_into_mm_is_asked_of_pytorch(
    a: tuple[int, ...], b: tuple[int, ...], mm: bool
) -> None:
    assert folds_to_mm(a, b) is mm


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])  # offset slices refused / lowered
@pytest.mark.parametrize(
    ("shape", "target"),
    [((2, 7, 32), [2, 7, 4, 8]), ((2, 7, 96), [2, 7, 3, 4, 8]), ((2, 7, 32), [2, 7, 2, 16]),
     ((5, 64), [5, 2, 32])],
    ids=["heads", "fused-qkv", "two-heads", "half-width"],
)  # fmt: skip
def test_split_heads_is_the_view(stack: str, shape: tuple[int, ...], target: list[int]) -> None:
    x = _seeded(*shape)
    with spyre_sim.use_stack(stack):
        out = split_heads(x, target)
    assert out.shape == x.view(target).shape
    assert torch.equal(out, x.view(target))
    assert out.is_contiguous()


def test_select_columns_is_the_slice() -> None:
    x = _seeded(3, 4, 8)
    assert torch.equal(select_columns(x, 4, 4), x[..., 4:8])
    assert torch.equal(select_columns(x[:, 1:], 1, 3), x[:, 1:, 1:4])


def _calls() -> list[tuple[str, Any]]:
    x8 = _seeded(2, 3, 7, 8)  # heads of 8: halves of 4
    x32 = _seeded(2, 7, 32)
    w = _seeded(11, 37, seed=2)
    bias = _seeded(11, seed=3)
    return [
        ("view", lambda: x32.view(2, 7, -1, 8)),
        ("reshape", lambda: torch.reshape(x32, (2, 7, 4, 8))),
        ("unflatten", lambda: x32.unflatten(-1, (4, 8))),
        ("rotate_half", lambda: torch.cat((-x8[..., 4:], x8[..., :4]), dim=-1)),
        ("chunk", lambda: torch.cat(x8.chunk(2, dim=-1)[::-1], -1)),
        ("split", lambda: x8.split(4, dim=-1)[1]),
        ("narrow", lambda: x8.narrow(-1, 4, 4)),
        ("unbind", lambda: torch.stack(_seeded(3, 2).unbind(-1))),
        ("linear", lambda: torch.nn.functional.linear(_seeded(5, 37), w, bias)),
        ("matmul", lambda: _seeded(5, 37) @ w.t()),
        ("addmm", lambda: torch.addmm(bias, _seeded(5, 37), w.t())),
        ("setitem-scalar", lambda: _assigned(_seeded(2, 2), -1e9)),
        ("setitem-tensor", lambda: _assigned(_seeded(3, 8), _seeded(3, 4, seed=4))),
    ]


def _assigned(x: torch.Tensor, value: Any) -> torch.Tensor:
    x[:, x.shape[-1] // 2 :] = value
    return x


@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])
@pytest.mark.parametrize("index", range(len(_calls())), ids=[n for n, _ in _calls()])
def test_every_rewritten_call_gives_the_stock_result(stack: str, index: int) -> None:
    _, call = _calls()[index]
    stock = call()
    with spyre_sim.use_stack(stack), StickLayout(ALL):
        rewritten = call()
    assert rewritten.shape == stock.shape
    assert torch.allclose(rewritten, stock, atol=1e-6)


# --- whole models on the CPU ----------------------------------------------------------------


def _both(model: torch.nn.Module) -> list[Any]:
    edits = []
    for adapter in (stick_align_padding, head_padding):
        assert adapter.matches(model)
        edits.append(apply(adapter, model))
    return edits


def _outputs(model: torch.nn.Module, **inputs: Any) -> Any:
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True, output_attentions=True)


def _flat(out: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif hasattr(value, "layers"):  # a Transformers cache
            for layer in value.layers:
                walk([getattr(layer, "keys", None), getattr(layer, "values", None)])
        elif hasattr(value, "to_tuple"):
            walk(value.to_tuple())

    walk(out)
    return found


MODELS = {
    "llama": lambda: causal_lm("llama", **TESTER),
    "qwen2": lambda: causal_lm("qwen2", **TESTER),
    "gpt2": lambda: causal_lm("gpt2", n_embd=32, n_head=4, vocab_size=99),
    "bert": lambda: base_model("bert", hidden_size=32, intermediate_size=37,
                               num_attention_heads=4, vocab_size=99),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_caches_and_state_dict_are_the_stock_ones(name: str) -> None:
    model = MODELS[name]()
    ids = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])
    stock_state = state_snapshot(model)
    stock = _flat(_outputs(model, input_ids=ids))
    edits = _both(model)
    adapted = _flat(_outputs(model, input_ids=ids))
    assert [t.shape for t in adapted] == [t.shape for t in stock]
    for a, s in zip(adapted, stock, strict=True):
        assert torch.allclose(a, s, atol=1e-5, rtol=1e-4)
    after = model.state_dict()
    assert list(after) == list(stock_state)
    assert all(torch.equal(after[k], v) for k, v in stock_state.items())
    for edit in reversed(edits):
        edit.rollback()
    assert all(_scoped_modes.MARKER not in m.__dict__ for m in model.modules())


def test_a_submodule_called_alone_is_rewritten_too() -> None:
    """A decoder layer called directly enters the mode itself (its own marker)."""

    def run(model: torch.nn.Module) -> torch.Tensor:
        layer = model.model.layers[0].to("spyre")
        x = _seeded(1, 7, 32).to("spyre")
        cos, sin = model.model.rotary_emb(x.cpu(), torch.arange(7)[None])
        with spyre_sim.use_stack("2026.09"), torch.no_grad():
            out = layer(x, position_embeddings=(cos.to("spyre"), sin.to("spyre")),
                        attention_mask=None)  # fmt: skip
        return out[0] if isinstance(out, tuple) else out

    with pytest.raises(spyre_sim.SpyreLayoutError):
        run(causal_lm("llama", **TESTER))
    model = causal_lm("llama", **TESTER)
    _both(model)
    assert run(model).shape == (1, 7, 32)


def test_aligned_models_do_not_match() -> None:
    aligned = config_for("llama", hidden_size=128, intermediate_size=256, head_dim=128,
                         num_attention_heads=1, num_key_value_heads=1, vocab_size=256)  # fmt: skip
    from transformers import AutoModelForCausalLM

    model = randomize(AutoModelForCausalLM.from_config(aligned))
    assert not stick_align_padding.matches(model)
    assert not head_padding.matches(model)


class _PerLayerConfig:
    """A config whose layers differ: the global ``head_dim`` refuses to answer (as
    Transformers' per-layer attributes do); the per-layer configs hold the head sizes."""

    model_type = "per-layer"

    def __init__(self, layers: list[Any]) -> None:
        self.per_layer_config = layers

    def to_dict(self) -> dict[str, Any]:
        return {}

    def __getattr__(self, name: str) -> Any:
        if name == "head_dim":
            raise RuntimeError("'head_dim' is a per-layer attribute")
        raise AttributeError(name)


class _LayerConfig:
    model_type = "layer"

    def __init__(self, head_dim: int) -> None:
        self.head_dim = head_dim

    def to_dict(self) -> dict[str, Any]:
        return {"head_dim": self.head_dim}


def test_head_sizes_are_read_from_per_layer_configs() -> None:
    model = torch.nn.Linear(128, 128)
    model.config = _PerLayerConfig([_LayerConfig(128), _LayerConfig(32)])  # type: ignore[assignment]
    assert head_padding.matches(model)
    model.config = _PerLayerConfig([_LayerConfig(128)])  # type: ignore[assignment]
    assert not head_padding.matches(model)


# --- on the device --------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


@pytest.mark.parametrize("name", ["llama", "bert", "gpt2"])
def test_the_device_refuses_the_stock_shapes_and_runs_the_adapted_model(name: str) -> None:
    import spyre_adapters

    ids = torch.tensor([[5, 17, 42, 98, 7, 63, 11]])
    reference = MODELS[name]()
    with torch.no_grad():
        expected = reference(input_ids=ids)[0].float()
    stock = MODELS[name]().to("spyre")
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        with pytest.raises(spyre_sim.SpyreLayoutError) as info:
            stock(input_ids=ids.to("spyre"))
        assert info.value.gap in ("stick-align", "sub-stick-head")
        model = MODELS[name]()
        spyre_adapters.prepare(model, "2026.09")
        applied = {a.name for a in spyre_adapters.applied(model)}
        assert {"stick-align-padding", "head-padding"} <= applied
        got = model.to("spyre")(input_ids=ids.to("spyre"))[0].cpu().float()
    cosine = torch.nn.functional.cosine_similarity(got.flatten(), expected.flatten(), dim=0)
    assert float(cosine) > 0.99


# --- packed views (offset-view-input, fused-projection-split 2.x) ---------------------------


@pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")
def test_cuts_at_any_offset_are_selections_while_packed_views_are_misread() -> None:
    """From 2026.06 the release slices at any offset, but until 2026.09 a copy of a view that
    starts inside a row reads from the row's start: packed K and V come back as Q."""
    host = spyre_sim.round_to_dl16(_seeded(7, 3 * 128).half())
    for stack, rewritten in (("2026.06", True), ("2026.08", True), ("2026.09", False)):
        with spyre_sim.use_stack(stack), torch.no_grad():
            x = host.to("spyre")
            with StickLayout(frozenset({"offset-view-input"})):
                pieces = x.split(128, dim=-1)
            assert all(p.is_contiguous() for p in pieces) is rewritten, stack
            for i, piece in enumerate(pieces):  # copies of the pieces, as SDPA inputs are made
                assert torch.equal(piece.contiguous().cpu(), host[:, i * 128 : (i + 1) * 128])
            if rewritten:  # the stock cut is misread there
                stock = x.split(128, dim=-1)[1].contiguous().cpu()
                assert torch.equal(stock, host[:, :128]), stack


@pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")
def test_picks_of_a_packed_view_are_selections_while_packed_views_are_misread() -> None:
    """BLOOM and Persimmon pick Q, K and V out of ``qkv.view(b, s, h, 3, d)``."""
    host = spyre_sim.round_to_dl16(_seeded(2, 5, 2, 3, 64).half())
    for stack, rewritten in (("2026.08", True), ("2026.09", False)):
        with spyre_sim.use_stack(stack), torch.no_grad():
            x = host.to("spyre")
            with StickLayout(frozenset({"offset-view-input"})):
                picks = [x[..., i, :] for i in range(3)]
            assert picks[1].is_contiguous() is rewritten, stack
            for i, pick in enumerate(picks):
                assert torch.equal(pick.contiguous().cpu(), host[..., i, :]), (stack, i)
