"""``unfolded-lstm``: ``nn.LSTM`` computed step by step where the other adapters see it.

CPU: for a bare ``nn.LSTM`` in many configurations (layers, directions, ``batch_first``, no
bias, given states, unbatched input, odd sizes) the adapted module returns the stock outputs
and states within float32 rounding (bit for bit against PyTorch's native CPU kernel, oneDNN
off), with the stock shapes, dtypes and strides, the stock state dict, and exact rollback; it
reads its weights at call time; an EnCodec model adapted gives the stock audio. Device: an
EnCodec of hidden size 32 stops at the LSTM's matmul (gap ``stick-align``; with the layout
checks off at ``_thnn_fused_lstm_cell``) without the adapter, and matches the CPU with it.
Declines: models without an LSTM, ``proj_size``, subclasses with their own forward; packed
sequences and dropout while training go to the stock kernel."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
import torch
from library_models import (
    CallNames,
    apply,
    assert_rollback_exact,
    manifest,
    randomize,
    registry_without,
)
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

import spyre_adapters
import spyre_sim
from spyre_adapters.library.unfolded_lstm import adapter, unfoldable

# float32 rounding of a few dozen steps through sigmoid/tanh: the stock kernel (oneDNN) and
# the step-by-step form reduce the same products in a different order
ATOL = 2e-6

CONFIGS: dict[str, dict[str, Any]] = {
    "one-layer": {"input_size": 32, "hidden_size": 32},
    "input-32-hidden-48": {"input_size": 32, "hidden_size": 48},
    "input-7-hidden-5": {"input_size": 7, "hidden_size": 5},
    "two-layers": {"input_size": 7, "hidden_size": 5, "num_layers": 2},
    "bidirectional": {"input_size": 12, "hidden_size": 8, "bidirectional": True},
    "two-layers-bidirectional-batch-first": {
        "input_size": 7,
        "hidden_size": 5,
        "num_layers": 2,
        "bidirectional": True,
        "batch_first": True,
    },
    "batch-first": {"input_size": 32, "hidden_size": 48, "batch_first": True},
    "no-bias": {"input_size": 7, "hidden_size": 5, "num_layers": 2, "bias": False},
    "dropout-in-eval": {"input_size": 7, "hidden_size": 5, "num_layers": 2, "dropout": 0.5},
}


def lstm(seed: int = 0, **config: Any) -> nn.LSTM:
    """An ``nn.LSTM`` with weights drawn large enough that every gate saturates somewhere."""
    torch.manual_seed(seed)
    module = nn.LSTM(**config)
    with torch.no_grad():
        for param in module.parameters():
            param.normal_(0.0, 0.6)
    return module.eval()


def lstm_inputs(
    module: nn.LSTM, states: bool, seq: int = 6, batch: int = 3
) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(1)
    shape = (batch, seq) if module.batch_first else (seq, batch)
    x = torch.randn(*shape, module.input_size, generator=gen)
    if not states:
        return (x,)
    layers = module.num_layers * (2 if module.bidirectional else 1)
    h0 = torch.randn(layers, batch, module.hidden_size, generator=gen)
    c0 = torch.randn(layers, batch, module.hidden_size, generator=gen)
    return (x, (h0, c0))


def run(module: nn.Module, *args: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        output, (h_n, c_n) = module(*args)
    return output, h_n, c_n


def adapted_copy(stock: nn.Module) -> nn.Module:
    adapted = copy.deepcopy(stock)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert not adapter.matches(adapted), "an adapted model must not match again"
    return adapted


def assert_same(
    out: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...], atol: float = ATOL
) -> None:
    for got, want in zip(out, ref, strict=True):
        assert got.shape == want.shape
        assert got.dtype == want.dtype
        assert got.stride() == want.stride()
        diff = (got - want).abs().max().item()
        assert diff <= atol, f"differs from stock by {diff}"


# --- CPU ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("states", [False, True], ids=["zero-states", "given-states"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_outputs_and_states_as_stock(name: str, states: bool) -> None:
    stock = lstm(**CONFIGS[name])
    adapted = adapted_copy(stock)
    args = lstm_inputs(stock, states)
    ref = run(stock, *args)
    assert_same(run(adapted, *args), ref)
    assert ref[0].abs().max() > 0.3, "the test LSTM must not be near zero"
    assert adapted.state_dict().keys() == stock.state_dict().keys()
    for key, value in stock.state_dict().items():
        assert torch.equal(adapted.state_dict()[key], value), key


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_bit_for_bit_the_native_cpu_kernel(name: str) -> None:
    """Without oneDNN, PyTorch's CPU LSTM runs the cell the adapter reproduces: same values."""
    stock = lstm(**CONFIGS[name])
    adapted = adapted_copy(stock)
    args = lstm_inputs(stock, states=True)
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False  # (flags() warns about TF32 on CPU-only builds)
    try:
        ref = run(stock, *args)
        out = run(adapted, *args)
    finally:
        torch.backends.mkldnn.enabled = enabled
    for got, want in zip(out, ref, strict=True):
        assert torch.equal(got, want)


def test_unbatched_input_is_the_same() -> None:
    stock = lstm(input_size=7, hidden_size=5, num_layers=2, bidirectional=True)
    adapted = adapted_copy(stock)
    x = torch.randn(6, 7, generator=torch.Generator().manual_seed(2))
    h0 = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    assert_same(run(adapted, x), run(stock, x))
    assert_same(run(adapted, x, (h0, h0 * 0.5)), run(stock, x, (h0, h0 * 0.5)))


def test_a_wrong_gate_order_would_be_caught() -> None:
    """The comparisons above see the gates: swapping two of them changes the outputs."""
    stock = lstm(input_size=7, hidden_size=5)
    swapped = copy.deepcopy(stock)
    with torch.no_grad():  # forget gate <-> input gate rows
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            p = getattr(swapped, name)
            p.copy_(torch.cat([p[5:10], p[:5], p[10:]]))
    apply(adapter, swapped)
    args = lstm_inputs(stock, states=True)
    assert (run(swapped, *args)[0] - run(stock, *args)[0]).abs().max() > 1e-2


def test_weights_are_read_at_call_time() -> None:
    stock = lstm(input_size=7, hidden_size=5, num_layers=2)
    adapted = adapted_copy(lstm(seed=5, input_size=7, hidden_size=5, num_layers=2))
    adapted.load_state_dict(stock.state_dict())
    args = lstm_inputs(stock, states=True)
    assert_same(run(adapted, *args), run(stock, *args))
    adapted.double()  # .to() swaps the parameters: the adapted forward follows
    x, (h0, c0) = args
    out = run(adapted, x.double(), (h0.double(), c0.double()))
    assert out[0].dtype == torch.float64
    assert_same(tuple(t.float() for t in out), run(stock, *args), atol=1e-5)


def test_gradients_are_the_stock_ones() -> None:
    stock = lstm(input_size=7, hidden_size=5, num_layers=2, bidirectional=True).train()
    adapted = adapted_copy(stock)
    x = lstm_inputs(stock, states=False)[0]
    for module in (stock, adapted):
        module.zero_grad()
        module(x)[0].square().sum().backward()
    for (name, a), b in zip(adapted.named_parameters(), stock.parameters(), strict=True):
        assert a.grad is not None
        assert b.grad is not None
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-5), name


def test_shows_the_stock_signature() -> None:
    stock = lstm(input_size=7, hidden_size=5)
    adapted = adapted_copy(stock)
    assert inspect.signature(adapted.forward) == inspect.signature(stock.forward)


def test_the_matmuls_are_issued_where_the_modes_see_them() -> None:
    below = CallNames()
    seen = below.seen
    stock = lstm(input_size=7, hidden_size=5)
    adapted = adapted_copy(stock)
    x = lstm_inputs(stock, states=False)[0]
    with torch.no_grad(), below:
        stock(x)
    assert "linear" not in seen  # stock: one _VF.lstm call, its matmuls unseen
    seen.clear()
    with torch.no_grad(), below:
        adapted(x)
    assert seen.count("linear") == 1 + x.shape[0]  # the input projection, then one per step
    assert {"chunk", "sigmoid", "tanh"} <= set(seen)


# EnCodec as Transformers' own tester builds it (tests/models/encodec/test_modeling_encodec.py)
_ENCODEC: dict[str, Any] = {
    "audio_channels": 2,
    "chunk_in_sec": None,
    "hidden_size": 32,
    "num_filters": 8,
    "num_residual_layers": 1,
    "upsampling_ratios": [8, 4],
    "num_lstm_layers": 1,
    "codebook_size": 64,
}


def encodec(seed: int = 0, **overrides: Any) -> nn.Module:
    from transformers import EncodecConfig, EncodecModel

    torch.manual_seed(seed)
    return randomize(EncodecModel(EncodecConfig(**{**_ENCODEC, **overrides})), seed).eval()


def _audio(batch: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 2, 40, generator=torch.Generator().manual_seed(seed))


def test_encodec_is_the_same_on_the_cpu() -> None:
    stock = encodec(num_lstm_layers=2)
    adapted = adapted_copy(stock)
    lstms = [m for m in adapted.modules() if isinstance(m, nn.LSTM)]
    assert len(lstms) == 2
    assert all("forward" in m.__dict__ for m in lstms)
    values = _audio()
    with torch.no_grad():
        ref = stock(values)
        out = adapted(values)
    assert list(out.keys()) == list(ref.keys())
    assert torch.equal(out.audio_codes, ref.audio_codes)
    diff = (out.audio_values - ref.audio_values).abs().max().item()
    assert diff <= 1e-5 * max(1.0, ref.audio_values.abs().max().item()), diff
    assert adapted.state_dict().keys() == stock.state_dict().keys()


def test_rollback_restores_the_model_exactly() -> None:
    model = encodec()
    values = _audio()

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(values).audio_values  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, model, probe)


def test_rollback_of_a_bare_lstm_inside_a_model() -> None:
    class Wraps(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = lstm(input_size=7, hidden_size=5, num_layers=2, bidirectional=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(x)[0]  # type: ignore[no-any-return]

    model = Wraps().eval()
    x = lstm_inputs(model.rnn, states=False)[0]

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(x)  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, model, probe)


# --- what stays stock ---------------------------------------------------------------------------


def test_declines_models_without_an_lstm() -> None:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    small = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
    assert not adapter.matches(Wav2Vec2Model(Wav2Vec2Config(**small, intermediate_size=20)))
    assert not adapter.matches(nn.Sequential(nn.GRU(4, 4), nn.RNN(4, 4), nn.LSTMCell(4, 4)))
    with pytest.raises(ValueError, match=r"unfolded-lstm does not apply to Linear: no nn\.LSTM"):
        adapter.apply(nn.Linear(4, 4), None)  # type: ignore[arg-type]


def test_declines_projections_and_own_forwards() -> None:
    class Custom(nn.LSTM):
        def forward(self, input: Any, hx: Any = None) -> Any:  # type: ignore[override]
            return super().forward(input, hx)

    class Plain(nn.LSTM):
        pass

    assert not unfoldable(nn.LSTM(8, 6, proj_size=3))
    assert not unfoldable(Custom(8, 6))
    assert unfoldable(Plain(8, 6))
    mixed = nn.ModuleDict({"proj": nn.LSTM(8, 6, proj_size=3), "plain": nn.LSTM(8, 6)})
    apply(adapter, mixed)
    assert "forward" not in mixed["proj"].__dict__
    assert "forward" in mixed["plain"].__dict__


def test_packed_sequences_and_training_dropout_run_the_stock_kernel() -> None:
    stock = lstm(input_size=7, hidden_size=5, num_layers=2, dropout=0.5)
    adapted = adapted_copy(stock)
    x = lstm_inputs(stock, states=False)[0]
    packed = pack_padded_sequence(x, torch.tensor([6, 4, 2]))
    with torch.no_grad():
        out, (h, c) = adapted(packed)
        ref, (h_ref, c_ref) = stock(packed)
    assert torch.equal(out.data, ref.data)
    assert torch.equal(h, h_ref)
    assert torch.equal(c, c_ref)
    stock.train()
    adapted.train()
    torch.manual_seed(7)
    ref_train = run(stock, x)
    torch.manual_seed(7)
    out_train = run(adapted, x)
    for got, want in zip(out_train, ref_train, strict=True):
        assert torch.equal(got, want)  # the same kernel, the same dropout draws


def test_manifest() -> None:
    data = manifest("unfolded-lstm", "1.0.0")
    assert data["kind"] == "permanent"
    assert data["gaps"] == ["stick-align"]
    assert data["order"] < manifest("stick-align-padding")["order"]
    assert "encodec" in data["families"]


# --- the device ---------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreFallbackWarning")
def test_encodec_runs_on_the_device_where_the_stock_model_fails() -> None:
    stock = encodec()
    values = _audio()
    with torch.no_grad():
        ref = stock(values).audio_values
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        assert "stick-align-padding" in {a.name for a in spyre_adapters.applied(plain)}
        with pytest.raises(spyre_sim.SpyreLoweringError, match="stick-align") as raised:
            plain.to("spyre")(values.to("spyre"))
        assert "lstm" in str(raised.value)

        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        assert "unfolded-lstm" in {a.name for a in spyre_adapters.applied(adapted)}
        out = adapted.to("spyre")(values.to("spyre")).audio_values.cpu().float()
    assert out.shape == ref.shape
    cos = torch.nn.functional.cosine_similarity(out.flatten(1), ref.flatten(1), dim=1)
    assert bool((cos > 0.999).all()), cos
    diff = (out - ref).abs().max().item()
    assert diff <= 5e-3 * max(1.0, ref.abs().max().item()), diff


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreFallbackWarning")
def test_functional_mode_no_longer_meets_the_fused_cell() -> None:
    stock = encodec()
    values = _audio()
    with torch.no_grad():
        ref = stock(values).audio_values
    with (
        spyre_sim.use_stack("2026.09"),
        spyre_sim.configure(layout_checks=False, numerics=False),
        torch.no_grad(),
    ):
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        with pytest.raises(spyre_sim.SpyreLoweringError, match="_thnn_fused_lstm_cell"):
            plain.to("spyre")(values.to("spyre"))
        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        out = adapted.to("spyre")(values.to("spyre")).audio_values.cpu()
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
@pytest.mark.parametrize("stack", ["2026.05", "2026.09"])
def test_a_bidirectional_two_layer_lstm_matches_the_cpu_on_the_device(stack: str) -> None:
    """Batch first, given states, sub-stick sizes: the padded matmuls and the gate cuts lower
    (before 2026.06 the cuts through fused-projection-split's selection matmuls)."""

    class Wraps(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = lstm(
                input_size=32, hidden_size=48, num_layers=2, bidirectional=True, batch_first=True
            )

        def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> Any:
            return self.rnn(x, (h0, c0))

    model = Wraps().eval()
    x, (h0, c0) = lstm_inputs(model.rnn, states=True)
    with torch.no_grad():
        ref, (h_ref, c_ref) = model(x, h0, c0)
    spyre_adapters.prepare(model, stack)
    assert "unfolded-lstm" in {a.name for a in spyre_adapters.applied(model)}
    with spyre_sim.use_stack(stack), torch.no_grad():
        device = model.to("spyre")
        out, (h, c) = device(x.to("spyre"), h0.to("spyre"), c0.to("spyre"))
        got = [t.cpu().float() for t in (out, h, c)]
    for value, want in zip(got, (ref, h_ref, c_ref), strict=True):
        assert value.shape == want.shape
        diff = (value - want).abs().max().item()
        assert diff <= 2e-2 * max(1.0, want.abs().max().item()), diff  # DL16 over 12 steps
