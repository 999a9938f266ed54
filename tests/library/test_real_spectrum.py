"""real-spectrum 1.0.0: one-sided spectra of real signals held as two real tensors inside the
forwards that take ``rfft`` and ``irfft`` (Autoformer's auto-correlation), so that the
transform, its conjugate products and the inverse are real matmuls; the stock expression stops
at gap ``complex`` on the device."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from library_models import apply, assert_rollback_exact, registry_without
from torch import nn

import spyre_adapters
import spyre_sim
from spyre_adapters.library.real_spectrum import (
    RealSpectra,
    RealSpectrum,
    adapter,
    forward_matrices,
    inverse_matrices,
)

# (shape, n of rfft, n of irfft, dim): odd and even lengths, cut and zero-padded signals
CASES = [
    ((6, 7, 5), 7, 7, 1),
    ((6, 8, 5), 8, 8, 1),
    ((6, 7, 5), 9, 9, 1),
    ((6, 9, 5), 6, 6, 1),
    ((3, 10), None, None, -1),
    ((4, 5, 6), None, None, 0),
    ((4, 8, 3), 8, 5, 1),
    ((4, 8, 3), 6, 11, 1),
]


def _pair(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(sum(shape))
    return (
        torch.randn(*shape, generator=generator, dtype=torch.float64),
        torch.randn(*shape, generator=generator, dtype=torch.float64),
    )


def _correlation(q: torch.Tensor, k: torch.Tensor, n: Any, m: Any, dim: int) -> torch.Tensor:
    spectrum = torch.fft.rfft(q, n=n, dim=dim) * torch.conj(torch.fft.rfft(k, n=n, dim=dim))
    return torch.fft.irfft(spectrum, n=m, dim=dim)


@pytest.mark.parametrize(("shape", "n", "m", "dim"), CASES)
def test_the_real_form_is_the_fft_in_float64(
    shape: tuple[int, ...], n: Any, m: Any, dim: int
) -> None:
    q, k = _pair(shape)
    expected = _correlation(q, k, n, m, dim)
    with RealSpectra():
        spectrum = torch.fft.rfft(q, n=n, dim=dim)
        got = _correlation(q, k, n, m, dim)
    assert isinstance(spectrum, RealSpectrum)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_any_other_use_of_a_spectrum_is_the_complex_tensor_it_stands_for() -> None:
    q, _ = _pair((4, 7, 3))
    with RealSpectra():
        spectrum = torch.fft.rfft(q, dim=1)
        magnitude = spectrum.abs()
        parts = torch.view_as_real(spectrum)
        ortho = torch.fft.rfft(q, dim=1, norm="ortho")  # another norm: the stock transform
    stock = torch.fft.rfft(q, dim=1)
    torch.testing.assert_close(magnitude, stock.abs(), rtol=0, atol=1e-12)
    torch.testing.assert_close(parts, torch.view_as_real(stock), rtol=0, atol=1e-12)
    assert isinstance(ortho, torch.Tensor)
    assert ortho.is_complex()


def test_the_matrices_drop_what_the_fft_drops() -> None:
    cos, sin = forward_matrices(6, 9)  # a signal of 9 cut to 6
    assert cos.shape == sin.shape == (4, 9)
    assert torch.equal(cos[:, 6:], torch.zeros(4, 3))
    real, imag = inverse_matrices(8, 5)  # n even: the Nyquist bin counts once
    assert real.shape == imag.shape == (5, 8)
    assert torch.equal(imag[0], torch.zeros(8))  # the imaginary part of DC is ignored
    torch.testing.assert_close(imag[4], torch.zeros(8, dtype=torch.float64), rtol=0, atol=1e-15)


# -- Autoformer --------------------------------------------------------------------------------


def autoformer(seed: int = 0) -> nn.Module:
    from transformers import AutoformerConfig, AutoformerModel

    config = AutoformerConfig(
        prediction_length=7,
        context_length=14,
        lags_sequence=[1, 2, 3],
        num_time_features=1,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=16,
        decoder_ffn_dim=16,
        label_length=10,
    )
    torch.manual_seed(seed)
    return AutoformerModel(config).eval()


def _inputs(device: str = "cpu", dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    past = 14 + 3
    values = {
        "past_values": torch.randn(2, past, generator=generator),
        "past_time_features": torch.randn(2, past, 1, generator=generator),
        "past_observed_mask": torch.ones(2, past),
        "future_values": torch.randn(2, 7, generator=generator),
        "future_time_features": torch.randn(2, 7, 1, generator=generator),
    }
    return {key: value.to(dtype).to(device) for key, value in values.items()}


def _hidden(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**_inputs()).last_hidden_state  # type: ignore[no-any-return]


def test_autoformer_is_the_stock_model_on_the_cpu() -> None:
    stock, adapted = autoformer(), autoformer()
    shapes = {key: tuple(value.shape) for key, value in stock.state_dict().items()}
    assert adapter.matches(adapted)
    edit = apply(adapter, adapted)
    assert len(edit) == 6  # encoder self-attention x2, decoder self- and cross-attention x2
    assert not adapter.matches(adapted), "an adapted model must not match again"
    torch.testing.assert_close(_hidden(adapted), _hidden(stock), rtol=1e-5, atol=1e-6)
    assert {key: tuple(value.shape) for key, value in adapted.state_dict().items()} == shapes
    assert adapted.config.to_dict() == stock.config.to_dict()


def test_rollback_is_exact() -> None:
    assert_rollback_exact(adapter, autoformer(), _hidden)


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        yield


def test_autoformer_stops_on_the_device_without_it_and_matches_with_it() -> None:
    reference = _hidden(autoformer())
    with _quiet(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        with spyre_sim.configure(numerics=False):
            plain = autoformer()
            spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
            with pytest.raises(spyre_sim.SpyreLoweringError) as stopped:
                plain.to("spyre")(**_inputs("spyre"))
        assert stopped.value.gap == "complex"
        model = autoformer()
        spyre_adapters.prepare(model, "2026.09")
        assert "real-spectrum" in {a.name for a in spyre_adapters.applied(model)}
        out = model.half().to("spyre")(**_inputs("spyre", torch.float16)).last_hidden_state
        out = out.float().cpu()
    assert out.shape == reference.shape
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert float(cosine) > 0.999
    torch.testing.assert_close(out, reference, rtol=0, atol=5e-3)  # DL16 storage
