"""host-complex-rope 1.1.0: real results of ops on host complex values return to the device.
XCodec2's vocoder head, ``irfft(polar(magnitude, phase)) * window`` with the window on the
device, mixed a host and a device tensor under 1.0.0 ("Expected all tensors to be on the same
device"); 1.1.0 runs it and matches the CPU. On the CPU every step is the stock one."""

from __future__ import annotations

import warnings

import pytest
import torch
from library_models import apply, assert_rollback_exact
from torch import nn

import spyre_sim
from spyre_adapters.library.host_complex_rope import adapter as adapter_1_0_0
from spyre_adapters.library.host_complex_rope_v1_1_0 import adapter


class Vocoder(nn.Module):
    """A spectrum predicted as magnitude and phase, back to windowed frames (XCodec2's head)."""

    def __init__(self, n_fft: int = 16) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.window = nn.Buffer(torch.hann_window(n_fft), persistent=False)

    def forward(self, stft: torch.Tensor) -> torch.Tensor:
        magnitude, phase = stft.chunk(2, dim=1)
        magnitude = torch.exp(magnitude.float()).clamp(max=1e2)
        spectrum = torch.polar(magnitude, phase.float())
        frames = torch.fft.irfft(spectrum, self.n_fft, dim=1)
        return frames * self.window[None, :, None]


def _stft(device: str = "cpu") -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 18, 5, generator=generator).to(device)  # n_fft 16: 9 bins each


def _run(module: nn.Module, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        return module(_stft(device))


def test_same_values_as_stock_on_the_cpu() -> None:
    expected = _run(Vocoder())
    module = Vocoder()
    assert adapter.matches(module)
    apply(adapter, module)
    assert torch.equal(_run(module), expected)


def test_on_the_device_1_1_0_runs_where_1_0_0_mixes_devices() -> None:
    expected = _run(Vocoder())
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"):
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        older = Vocoder()
        apply(adapter_1_0_0, older)
        with pytest.raises(RuntimeError, match="same device"):
            _run(older.to("spyre"), "spyre")
        module = Vocoder()
        apply(adapter, module)
        out = _run(module.to("spyre"), "spyre")
        assert out.device.type == "spyre"
        out = out.cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=2e-2)  # DL16 storage


def test_rollback_is_exact() -> None:
    stft = _stft()
    assert_rollback_exact(adapter, Vocoder(), lambda m: m(stft))
