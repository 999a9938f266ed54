"""``bridge-grid-sampler-2d`` 2.1.0: the host computes ``grid_sampler_2d`` in float32.

Mask2Former's multi-scale deformable attention samples ``value.flatten(2).transpose(1, 2)
.reshape(batch * heads, head_dim, h, w)``; at batch size one that is a view whose channels are
a strided slice of a wider row. 2.0.0 handed that view, in fp16, to PyTorch's CPU kernel, which
returns NaN for many samples of such a view; the NaN entered the device as ``-inf`` and the
model's pixel decoder came back wrong, silently.
"""

from __future__ import annotations

import copy
import warnings
from types import ModuleType

import pytest
import torch

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import op_bridge_v3
from spyre_adapters.library.bridge_grid_sampler_2d_v2_0_0 import adapter as first
from spyre_adapters.library.bridge_grid_sampler_2d_v2_1_0 import adapter as second
from spyre_adapters.library.op_bridge_v3 import OpBridge, candidate, host_float32
from spyre_sim.numerics import round_wide_to_dl16

A = torch.ops.aten


class Deformable(torch.nn.Module):
    """The sampling step of a deformable attention at batch size one (Mask2Former's shapes)."""

    def forward(self, value: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        heads, head_dim = 4, 16
        view = value.flatten(2).transpose(1, 2).reshape(heads, head_dim, 32, 32)
        return torch.nn.functional.grid_sample(
            view, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    value = torch.randn(1, 1024, 4, 16, generator=generator)
    grid = torch.rand(4, 336, 4, 2, generator=generator) * 2 - 1
    return value, grid


def test_the_cpu_half_kernel_returns_nan_for_such_a_view() -> None:
    """Why 2.1.0 exists (PyTorch 2.13's CPU kernel): the same view in fp16 gives NaN, a
    contiguous copy or float32 none."""
    value, grid = _inputs()
    view = value.half().flatten(2).transpose(1, 2).reshape(4, 16, 32, 32)
    sample = torch.nn.functional.grid_sample
    assert bool(sample(view, grid.half(), align_corners=False).isnan().any())
    assert not bool(sample(view.contiguous(), grid.half(), align_corners=False).isnan().any())
    assert not bool(sample(view.float(), grid, align_corners=False).isnan().any())


def _on_device(spyre: ModuleType, bridge: OpBridge, stack: str) -> torch.Tensor:
    model = Deformable()
    bridge.apply(model, ModelEdit(model))
    value, grid = _inputs()
    with spyre.use_stack(stack), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out: torch.Tensor = model(value.to("spyre"), grid.to("spyre")).cpu()
    return out.float()


#: The releases the manifest says the candidate was validated at (before 2026.02 the device
#: holds no 4-D tensor: gap ``rank-4d``).
RELEASES = ["2026.02", "2026.03", "2026.05", "2026.06", "2026.07", "2026.08", "2026.09"]


def test_the_manifest_lists_the_releases_tested_here() -> None:
    from spyre_adapters import build_registry, builtin

    registry = build_registry(entry_points=False, plugins=[builtin])
    manifest = registry.get("bridge-grid-sampler-2d", "2.1.0")
    assert [b.candidate for b in manifest.bridges] == ["host-float32"]
    assert list(manifest.bridges[0].releases) == RELEASES


@pytest.mark.parametrize("stack", RELEASES)
def test_it_matches_the_cpu_where_2_0_0_did_not(spyre: ModuleType, stack: str) -> None:
    value, grid = _inputs()
    # the op on the values the device holds, in float32: only the result's rounding differs
    stored = [round_wide_to_dl16(t).float() for t in (value, grid)]
    expected = Deformable()(*stored)
    got = _on_device(spyre, second, stack)
    assert bool(torch.isfinite(got).all())
    assert torch.allclose(got, expected, atol=1e-3, rtol=2e-3)
    # 2.0.0: the NaN of the fp16 kernel enter as -inf (or, where nan-entry is closed, as NaN)
    assert not torch.allclose(_on_device(spyre, first, stack), expected, atol=1e-1)


def test_the_stock_model_on_the_cpu_is_unchanged() -> None:
    model = Deformable()
    stock = copy.deepcopy(model)
    edit = ModelEdit(model)
    second.apply(model, edit)
    value, grid = _inputs()
    assert torch.equal(model(value, grid), stock(value, grid))
    edit.rollback()
    assert torch.equal(model(value, grid), stock(value, grid))


def test_the_candidate_is_the_cpu_op_in_float32_cast_back() -> None:
    assert candidate(A.grid_sampler_2d.default, "host-float32") is host_float32
    assert candidate(A.sort.default, "host") is op_bridge_v3.CANDIDATES["host"]
    with pytest.raises(ValueError, match="unknown bridge candidate 'magic'"):
        candidate(A.sort.default, "magic")
    with pytest.raises(ValueError, match="needs at least one op"):
        OpBridge({})
    assert set(op_bridge_v3.CANDIDATES) == {*op_bridge_v3.op_bridge.CANDIDATES, "host-float32"}


def test_in_place_ops_are_not_taken(spyre: ModuleType) -> None:
    """An op that writes an input would write the float32 copy: refused, not wrong."""
    x = torch.zeros(64, dtype=torch.float16).to("spyre")
    with pytest.raises(NotImplementedError, match="writes an input in place"):
        host_float32(A.fill_.Scalar, (x, 1.0), {})


def test_the_generator_now_finds_this_candidate_itself() -> None:
    """The bridge loop's validation tries each call with its dims stored in reverse order too
    (the strides a device view hands a host kernel), against the CPU kernel on contiguous
    copies: ``host`` fails there (the NaN), ``host-float32`` holds, and it is the candidate
    the loop keeps -- where 2.0.0's loop had kept ``host``. The half kernel is 0.04 from the
    float32 one on these values; ``host-float32`` is judged against the latter too."""
    import spyre_sim
    from spyre_adapters.enablement._bridge_candidates import choose_candidate
    from spyre_adapters.enablement.op_samples import Sample

    value, grid = _inputs()
    view = value.half().flatten(2).transpose(1, 2).reshape(4, 16, 32, 32).contiguous()
    sample = Sample("captured", (view, grid.half(), 0, 0, False), {}, captured=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdicts = choose_candidate(
            A.grid_sampler_2d.default, [sample], spyre_sim.resolve_stack("2026.09")
        )
    by_name = {v.candidate: v for v in verdicts}
    assert [v.candidate for v in verdicts][-2:] == ["host", "host-float32"]
    host = {c.label: c.outcome for c in by_name["host"].checks}
    assert host["captured"] == "holds"
    assert host["memory order reversed"] == "mismatch"
    assert by_name["host-float32"].holds, by_name["host-float32"].reason
