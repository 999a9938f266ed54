"""Stand-in sweep workers (module level, so isolated worker processes can import them)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import torch

from spyre_adapters.enablement.results import Category, TriageResult

#: The category each stand-in family reports, at every release.
VERDICTS = {
    "alpha": Category.NATIVE,
    "beta": Category.ADAPTED,
    "gamma": Category.BLOCKED,
    "delta": Category.MISMATCH,
}


def verdict_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    """Reports ``VERDICTS[family]``; at the newest release every family is native."""
    rows = []
    for release in releases:
        category = VERDICTS[family] if release != releases[-1] else Category.NATIVE
        result = TriageResult(family, release, preset, category, f"stand-in {category.value}")
        rows.append(result.to_json())
    return rows


def crashing_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    os.kill(os.getpid(), signal.SIGKILL)
    return []


def exiting_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    os._exit(3)


def hanging_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    time.sleep(600)
    return []


def raising_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    raise ValueError(f"stand-in failure for {family}")


def mixed_worker(
    family: str, releases: list[str], preset: str, layout_checks: bool
) -> list[dict[str, Any]]:
    """``crash`` dies, ``hang`` sleeps, anything else is native."""
    if family == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if family == "hang":
        time.sleep(600)
    return [
        TriageResult(family, r, preset, Category.NATIVE, "stand-in").to_json() for r in releases
    ]


class _Noisy(torch.nn.Module):
    """A forward that draws random numbers (as VITS samples its durations and waveform)."""

    def __init__(self, noisy: bool) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)
        self.noisy = noisy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        return h + torch.randn_like(h) if self.noisy else h


def noisy_family(noisy: bool) -> Any:
    """A built family whose forward draws random numbers when ``noisy``."""
    from spyre_adapters.enablement.families import BuiltFamily
    from spyre_adapters.enablement.size_presets import REALISTIC

    torch.manual_seed(0)
    model = _Noisy(noisy).eval()
    x = torch.randn(2, 64, 64)
    with torch.no_grad():
        reference = model(x)
    return BuiltFamily("noisy", REALISTIC, None, model, {"x": x}, "base", "x", reference, {})


class _Routed(torch.nn.Module):
    """Each row goes to the expert of its best score, as an MoE router sends a token."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chosen = x.topk(1, dim=-1).indices.squeeze(-1)
        return self.experts[chosen]


def routed_family() -> Any:
    """A built family whose routing rounding decides: rows 0 and 1 hold 0.5632 and 0.5630,
    one DL16 value (0.56348), in opposite orders, so whatever the device's tie rule one of
    them goes to another expert than on the CPU; the other rows are decided."""
    from spyre_adapters.enablement.families import BuiltFamily
    from spyre_adapters.enablement.size_presets import REALISTIC

    torch.manual_seed(0)
    model = _Routed().eval()
    x = torch.rand(4, 64) * 0.25
    x[0, :2] = torch.tensor([0.5632, 0.5630])
    x[1, :2] = torch.tensor([0.5630, 0.5632])
    x[2, 5] = 0.9
    x[3, 9] = 0.9
    with torch.no_grad():
        reference = model(x)
    return BuiltFamily("routed", REALISTIC, None, model, {"x": x}, "base", "x", reference, {})
