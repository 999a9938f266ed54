"""Every generated bridge the lifecycle applies with a candidate that runs on the device (a
rewrite or a decomposition, not the host kernel) holds on calls of the sizes real models make.

Generated bridges are validated on the calls tester-sized models made and on variants of them
(:mod:`spyre_adapters.enablement.op_validation`). ``bridge-histc`` 2.0.0 passed that and still
miscounted the tokens of 64 experts: its rewrite was exact only up to 33 bins. A device-side
form's exactness can depend on how large the call is, so each op such a bridge covers has
calls here at real models' sizes (expert counts of Mixtral to DeepSeek-V3, a ResNet stem's
pooling, a 56x56 unfold), and a new device-side bridge fails the guard below until it gets
some."""

from __future__ import annotations

import warnings

import pytest
import torch

import spyre_sim
from spyre_adapters import build_registry, builtin
from spyre_adapters.enablement.op_samples import Sample
from spyre_adapters.enablement.op_validation import validate
from spyre_adapters.library.op_bridge import resolve_op
from spyre_adapters.lifecycle import Lifecycle

REGISTRY = build_registry(entry_points=False, plugins=[builtin])


def _device_side() -> dict[tuple[str, str], list[str]]:
    """(op, candidate) -> the releases where the lifecycle applies a generated bridge whose
    candidate runs on the device."""
    found: dict[tuple[str, str], list[str]] = {}
    for release in REGISTRY.catalogue:
        for manifest in Lifecycle(REGISTRY).resolve(release):
            for bridge in manifest.bridges if manifest.generated else ():
                if bridge.candidate != "host":
                    found.setdefault((bridge.op, bridge.candidate), []).append(release.name)
    return found


APPLIED = _device_side()


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _routing(experts: int) -> Sample:
    ids = torch.randint(0, experts, (512,), generator=_generator()).to(torch.float16)
    return Sample(f"{experts} experts", (ids, experts, 0, experts - 1))


def _grouped(experts: int) -> Sample:
    g = _generator()
    rows = 96
    counts = torch.randint(0, experts, (rows,), generator=g).bincount(minlength=experts)
    offsets = counts.cumsum(0).to(torch.int32)
    values = torch.randn(rows, 64, generator=g).half()
    weights = (torch.randn(experts, 64, 128, generator=g) / 8).half()
    return Sample(f"{experts} experts", (values, weights, offsets))


def _pool(size: int, kernel: int, stride: int, padding: int) -> Sample:
    x = torch.randn(1, 64, size, size, generator=_generator()).half()
    return Sample(f"{size}x{size}, kernel {kernel}", (x, [kernel] * 2, [stride] * 2, [padding] * 2))


#: Op -> calls at real sizes.
REAL_SIZES: dict[str, list[Sample]] = {
    "aten.histc.default": [_routing(e) for e in (8, 60, 64, 128, 256)],
    "aten._grouped_mm.default": [_grouped(e) for e in (8, 64)],
    "aten.max_pool2d_with_indices.default": [_pool(112, 3, 2, 1), _pool(64, 2, 2, 0)],
    "aten.im2col.default": [
        Sample(
            "56x56, kernel 3",
            (
                torch.randn(1, 64, 56, 56, generator=_generator()).half(),
                [3, 3],
                [1, 1],
                [1, 1],
                [1, 1],
            ),
        )
    ],
    "aten.pow.Tensor_Scalar": [
        Sample(f"exponent {e}", ((torch.rand(4096, generator=_generator()) * 8).half(), e))
        for e in (2, 0.5, -0.5, -1)
    ],
    "aten.bucketize.Tensor": [
        Sample(
            "T5's relative-position buckets",
            (
                torch.randint(-200, 200, (1024,), generator=_generator()).half(),
                torch.tensor([0.0, 1, 2, 4, 8, 16, 32, 64, 128]).half(),
            ),
        )
    ],
    "aten.isinf.default": [
        Sample(
            "4096 values with infinities",
            (torch.where(torch.arange(4096) % 7 == 0, torch.inf, torch.randn(4096)).half(),),
        )
    ],
}


def test_every_device_side_bridge_has_calls_at_real_sizes() -> None:
    missing = sorted({op for op, _ in APPLIED} - set(REAL_SIZES))
    assert not missing, f"add calls at real models' sizes for {missing} to REAL_SIZES"


@pytest.mark.parametrize(("op", "candidate"), sorted(APPLIED), ids=lambda v: str(v))
def test_the_candidate_is_exact_at_real_sizes_or_refuses(op: str, candidate: str) -> None:
    """At each release that applies it, on each call at real sizes the candidate matches the
    CPU, or raises (a form that does not cover the call, an op the release refuses inside
    it: the model then stops with the gap named, it does not go on with wrong numbers). At
    least one call holds at each release."""
    overload = resolve_op(op)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in APPLIED[(op, candidate)]:
            release = spyre_sim.resolve_stack(name)
            outcomes = []
            for sample in REAL_SIZES.get(op, []):
                (check,) = validate(overload, candidate, [sample], release).checks
                assert check.outcome != "mismatch", (name, sample.label, check.detail)
                outcomes.append(check.outcome)
            assert "holds" in outcomes, (name, outcomes)
