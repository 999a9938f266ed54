"""``real-dft``: FNet's Fourier token mixing as real matmuls, ``C_s X C_h - S_s X S_h``.

The math: the matrices are the real and minus the imaginary part of the DFT matrix, and the
rewrite is the real part of the 2-D FFT over the sequence and hidden dims (both terms needed).
CPU: adapted FNets (base model and masked LM; odd sequence lengths and hidden sizes; the TPU
form that chains one FFT per dim) give the stock outputs and gradients, show the stock state
dict, config and output shapes, and roll back exactly; the DFT-matrix form and modules that are
not a 2-D DFT are declined. Device (stack 2026.09): the stock mixing stops at gap ``complex``
(functional numerics; faithful numerics store its float32 input as float16, which the FFT
refuses), the adapted model runs, its stick-misaligned matmuls padded, and matches the CPU.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
import torch
from library_models import (
    apply,
    assert_rollback_exact,
    cosine,
    encoder,
    randomize,
    registry_without,
)
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.real_dft import (
    DftMatrices,
    adapter,
    dft_matrices,
    mixes_by_dft,
    real_dft,
)

SIZES = [(7, 32), (5, 48)]  # (sequence length, hidden size): neither a whole stick
LAYERS = 2


def fnet(
    seq: int = 7, hidden: int = 32, *, head: str = "FNetModel", seed: int = 0, **overrides: Any
) -> Any:
    """A tiny FNet (Transformers' tester sizes by default) with seeded random weights."""
    import transformers

    sizes: dict[str, Any] = {
        "vocab_size": 99,
        "hidden_size": hidden,
        "num_hidden_layers": LAYERS,
        "intermediate_size": 37,
        "max_position_embeddings": 512,
        "type_vocab_size": 16,
        "tpu_short_seq_length": seq,
    }
    config = transformers.FNetConfig(**{**sizes, **overrides})
    torch.manual_seed(seed)
    return randomize(getattr(transformers, head)(config), seed).eval()


def ids(seq: int, batch: int = 3) -> torch.Tensor:
    return torch.randint(0, 99, (batch, seq), generator=torch.Generator().manual_seed(seq))


def _mixers(model: nn.Module) -> list[str]:
    return [
        path
        for path, m in model.named_modules()
        if type(m).__name__.endswith("BasicFourierTransform")
    ]


# -- the math ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 32, 48, 64, 100])
def test_the_matrices_are_the_parts_of_the_dft_matrix(n: int) -> None:
    dft = torch.fft.fft(torch.eye(n, dtype=torch.complex128), dim=0)  # exp(-2πi jk/n)
    cos, sin = dft_matrices(n)
    assert cos.dtype == sin.dtype == torch.float64
    torch.testing.assert_close(cos, dft.real, rtol=0, atol=1e-12)
    torch.testing.assert_close(sin, -dft.imag, rtol=0, atol=1e-12)
    assert torch.equal(cos, cos.T)
    assert torch.equal(sin, sin.T)


@pytest.mark.parametrize("shape", [(3, 7, 32), (2, 5, 48), (1, 64, 64), (2, 1, 3), (1, 4, 1)])
def test_real_dft_is_the_real_part_of_the_2d_fft(shape: tuple[int, int, int]) -> None:
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected = torch.fft.fftn(x, dim=(1, 2)).real
    torch.testing.assert_close(real_dft(x, DftMatrices()), expected, rtol=0, atol=1e-10)
    # float32, as a model runs it: within float32 rounding of the exact values (up to ~60)
    got = real_dft(x.float(), DftMatrices())
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)


def test_both_terms_are_needed_and_with_their_signs() -> None:
    """The comparisons above can tell a wrong formula: dropping the sine term or flipping its
    sign gives other values."""
    x = torch.randn(2, 7, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    expected = torch.fft.fftn(x, dim=(1, 2)).real
    cos_s, sin_s = dft_matrices(7)
    cos_h, sin_h = dft_matrices(32)
    for wrong in (cos_s @ x @ cos_h, cos_s @ x @ cos_h + sin_s @ x @ sin_h):
        assert (wrong - expected).abs().max() > 1.0


def test_the_cache_keeps_one_pair_per_size_dtype_and_device() -> None:
    matrices = DftMatrices(size=2)
    x = torch.zeros(1, 7, 32)
    first = matrices.get(7, x)
    assert matrices.get(7, x) is first
    assert first[0].dtype == torch.float32
    assert matrices.get(7, x.double())[0].dtype == torch.float64
    matrices.get(32, x)
    assert len(matrices) == 2  # the least recently used pair is dropped
    assert matrices.get(7, x) is not first


# -- CPU: adapted vs stock ---------------------------------------------------------------------


def _shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {key: tuple(value.shape) for key, value in model.state_dict().items()}


@pytest.mark.parametrize("head", ["FNetModel", "FNetForMaskedLM"])
@pytest.mark.parametrize(("seq", "hidden"), SIZES)
def test_same_outputs_as_stock_on_the_cpu(seq: int, hidden: int, head: str) -> None:
    stock, adapted = fnet(seq, hidden, head=head), fnet(seq, hidden, head=head)
    state = {key: value.clone() for key, value in adapted.state_dict().items()}
    assert adapter.matches(adapted)
    edit = apply(adapter, adapted)
    assert len(_mixers(adapted)) == LAYERS
    assert sorted(edit) == sorted(_mixers(adapted))
    assert not adapter.matches(adapted), "an adapted model must not match again"
    inputs = ids(seq)
    with torch.no_grad():
        ref = stock(inputs, output_hidden_states=True)
        out = adapted(inputs, output_hidden_states=True)
    assert list(out.keys()) == list(ref.keys())
    for key in ref:
        if isinstance(ref[key], torch.Tensor):
            assert out[key].shape == ref[key].shape, key
            torch.testing.assert_close(out[key], ref[key], rtol=1e-5, atol=1e-5)
    assert len(out.hidden_states) == len(ref.hidden_states) == LAYERS + 1
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # the model shows what the stock one shows
    assert adapted.state_dict().keys() == state.keys() == stock.state_dict().keys()
    assert _shapes(adapted) == _shapes(stock)
    assert all(torch.equal(adapted.state_dict()[key], value) for key, value in state.items())
    assert adapted.config.to_dict() == stock.config.to_dict()


def test_the_mixing_layer_itself_gives_the_stock_values() -> None:
    stock, adapted = fnet(), fnet()
    apply(adapter, adapted)
    x = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(3))
    ref = stock.encoder.layer[0].fourier.self(x)
    out = adapted.encoder.layer[0].fourier.self(x)
    assert isinstance(out, tuple)
    assert len(out) == len(ref) == 1
    torch.testing.assert_close(out[0], ref[0], rtol=1e-5, atol=1e-4)  # values up to ~40
    shown = inspect.signature(adapted.encoder.layer[0].fourier.self.forward)
    assert shown == inspect.signature(stock.encoder.layer[0].fourier.self.forward)


@pytest.mark.parametrize("release", ["2025.12", "2026.09"])
def test_prepared_at_a_release_the_model_shows_the_stock_surface(release: str) -> None:
    stock, model = fnet(head="FNetForMaskedLM"), fnet(head="FNetForMaskedLM")
    spyre_adapters.prepare(model, release)
    assert "real-dft" in {a.name for a in spyre_adapters.applied(model)}
    assert inspect.signature(model.forward) == inspect.signature(stock.forward)
    assert model.config.to_dict() == stock.config.to_dict()
    assert _shapes(model) == _shapes(stock)
    spyre_adapters.restore(model)
    assert all(m.__dict__.get("forward") is None for m in model.modules())


def test_other_ranks_run_the_stock_forward() -> None:
    adapted = fnet()
    apply(adapter, adapted)
    x = torch.randn(2, 7, 32, 3, generator=torch.Generator().manual_seed(4))
    out = adapted.encoder.layer[0].fourier.self(x)[0]
    assert torch.equal(out, torch.fft.fftn(x, dim=(1, 2)).real)
    empty = torch.zeros(2, 0, 32)  # the stock FFT's own error
    for model in (fnet(), adapted):
        with pytest.raises(RuntimeError, match="Invalid number of data points"):
            model.encoder.layer[0].fourier.self(empty)


def test_same_gradients_as_stock_after_an_inference_mode_call() -> None:
    """Matrices first built under ``inference_mode`` are ordinary tensors: a later forward
    with gradients can save them for backward."""
    stock, adapted = fnet(), fnet()
    apply(adapter, adapted)
    with torch.inference_mode():
        adapted(ids(7))
    grads = []
    for model in (stock, adapted):
        embeds = model.get_input_embeddings()(ids(7)).detach().requires_grad_(True)
        model(inputs_embeds=embeds).last_hidden_state.square().sum().backward()
        assert embeds.grad is not None
        grads.append(embeds.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_rollback_restores_the_model_exactly() -> None:
    def probe(model: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return model(ids(7)).last_hidden_state  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, fnet(), probe)


def test_the_tpu_form_chaining_one_fft_per_dim_is_adapted_the_same() -> None:
    """``use_tpu_fourier_optimizations`` without DFT matrices (here: more than 4096 positions)
    chains ``torch.fft.fft`` over the hidden then the sequence dim: the same transform. The
    model's own check that the input is ``tpu_short_seq_length`` long is left as it is."""
    tpu: dict[str, Any] = {"use_tpu_fourier_optimizations": True, "max_position_embeddings": 4100}
    stock, adapted = fnet(**tpu), fnet(**tpu)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    with torch.no_grad():
        torch.testing.assert_close(
            adapted(ids(7)).last_hidden_state, stock(ids(7)).last_hidden_state, rtol=1e-5, atol=1e-5
        )
        for model in (stock, adapted):  # the stock error, raised by the model itself
            with pytest.raises(ValueError, match="tpu_short_seq_length"):
                model(ids(5))


def _scipy_dft(n: int) -> Any:
    """``scipy.linalg.dft(n)``: ``exp(-2πi jk/n)`` as a complex128 array."""
    import numpy as np

    index = np.arange(n)
    return np.exp(-2j * np.pi * np.outer(index, index) / n)


def _stand_in_for_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """FNet builds DFT matrices only with SciPy: stand in for it where it is missing."""
    modeling = importlib.import_module("transformers.models.fnet.modeling_fnet")
    if not hasattr(modeling, "linalg"):
        monkeypatch.setattr(modeling, "is_scipy_available", lambda: True)
        monkeypatch.setattr(
            modeling, "linalg", types.SimpleNamespace(dft=_scipy_dft), raising=False
        )


def test_declines_the_dft_matrix_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its complex64 buffers are state the device cannot store and the values the stock form
    computes with: the adapter leaves it (and the model stops at gap ``complex``)."""
    _stand_in_for_scipy(monkeypatch)
    model = fnet(use_tpu_fourier_optimizations=True)
    mixer = model.encoder.layer[0].fourier.self
    assert mixer.dft_mat_seq.is_complex()
    assert not mixes_by_dft(mixer)
    assert not adapter.matches(model)
    with pytest.raises(ValueError, match="real-dft does not apply to FNetModel"):
        apply(adapter, model)


PROBE = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(5))


def _dft(n: int) -> torch.Tensor:
    return torch.fft.fft(torch.eye(n, dtype=torch.complex64), dim=0)  # type: ignore[no-any-return]


def _two_dim_matmul(x: torch.Tensor, seq: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """FNet's DFT-matrix form."""
    cut = seq[: x.shape[1], : x.shape[1]]
    return torch.einsum("bij,jk,ni->bnk", x.type(torch.complex64), hidden, cut)


class Mixer(nn.Module):
    """A mixing module written as FNet's, around a given transform."""

    def __init__(self, transform: Any) -> None:
        super().__init__()
        self.fourier_transform = transform

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.fourier_transform(hidden_states).real,)


def test_matches_by_structure_and_by_what_the_forward_computes() -> None:
    assert mixes_by_dft(Mixer(partial(torch.fft.fftn, dim=(1, 2))))
    assert mixes_by_dft(Mixer(torch.fft.fft2))  # the last two dims of a 3-D input
    assert not mixes_by_dft(Mixer(partial(torch.fft.fftn, dim=(1, 2), norm="ortho")))
    assert not mixes_by_dft(Mixer(partial(torch.fft.fft, dim=1)))  # one dim only
    assert not mixes_by_dft(Mixer(torch.fft.rfft2))  # half the spectrum: another shape
    # the DFT-matrix form computes the DFT of the probe's sizes, but with matrices it holds
    by_matrices = partial(_two_dim_matmul, seq=_dft(3), hidden=_dft(5))
    assert torch.allclose(
        by_matrices(PROBE).real, torch.fft.fftn(PROBE, dim=(1, 2)).real.float(), atol=1e-5
    )
    assert not mixes_by_dft(Mixer(by_matrices))


def test_does_not_match_models_without_it() -> None:
    assert not adapter.matches(encoder("bert", hidden_size=32, num_attention_heads=2))
    with pytest.raises(ValueError, match="no module returns the real part"):
        apply(adapter, nn.Sequential(nn.Linear(4, 4)))


# -- on the device ---------------------------------------------------------------------------


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        yield


@pytest.mark.parametrize(("seq", "hidden"), SIZES)
def test_the_stock_mixing_stops_on_the_device_and_the_adapted_one_runs(
    seq: int, hidden: int
) -> None:
    stock = fnet(seq, hidden, head="FNetForMaskedLM")
    inputs = ids(seq)
    with torch.no_grad():
        ref = stock(inputs).logits
    with _quiet(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        # functional numerics: the complex FFT reaches the device, which has no complex format
        with spyre_sim.configure(numerics=False):
            plain = copy.deepcopy(stock)
            spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
            with pytest.raises(spyre_sim.SpyreLoweringError) as stopped:
                plain.to("spyre")(inputs.to("spyre"))
        assert stopped.value.gap == "complex"
        assert stopped.value.module_path == "fnet.encoder.layer.0.fourier.self"
        # faithful numerics: float32 is stored as float16, which torch's FFT refuses
        plain = copy.deepcopy(stock)
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        with pytest.raises(RuntimeError):
            plain.to("spyre")(inputs.to("spyre"))

        adapted = copy.deepcopy(stock)
        spyre_adapters.prepare(adapted, "2026.09")
        applied = {a.name for a in spyre_adapters.applied(adapted)}
        assert {"real-dft", "stick-align-padding"} <= applied  # K = 7, 5, 32, 48 padded
        out = adapted.to("spyre")(inputs.to("spyre")).logits
        assert out.device.type == "spyre"
        out = out.cpu().float()
    assert out.shape == ref.shape
    assert cosine(out, ref) > 0.999
    torch.testing.assert_close(out, ref, rtol=5e-2, atol=5e-2)  # DL16: 9 fraction bits
    assert (out.argmax(-1) == ref.argmax(-1)).float().mean() > 0.9


def test_the_adapted_model_matches_closely_with_functional_numerics() -> None:
    stock = fnet()
    with torch.no_grad():
        ref = stock(ids(7)).last_hidden_state
    adapted = copy.deepcopy(stock)
    spyre_adapters.prepare(adapted, "2026.09")
    with (
        _quiet(),
        spyre_sim.use_stack("2026.09"),
        spyre_sim.configure(numerics=False),
        torch.no_grad(),
    ):
        out = adapted.to("spyre")(ids(7).to("spyre")).last_hidden_state.cpu()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
