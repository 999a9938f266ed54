"""Results that hold NaN their operands did not: counted where the device made them
(spyre_sim._nan_made), so a NaN in a test's output is explained by the op that began it."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

from spyre_sim import telemetry
from spyre_sim._nan_made import NAN_MAKERS, clean, made_nan

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


class Normalise(torch.nn.Module):
    """A CLIP-style head: embeddings divided by their norm."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=-1, keepdim=True)


def test_a_division_the_device_makes_0_by_0_is_counted_where_it_happened(
    spyre: ModuleType,
) -> None:
    # 1e-12 is below DL16's smallest normal (2**-30): zero on the device, so its norm is zero
    tiny = torch.full((2, 8), 1e-12)
    assert not torch.isnan(Normalise()(tiny)).any()  # the CPU divides two tiny numbers
    out = Normalise()(tiny.to("spyre")).cpu()
    assert torch.isnan(out).all()
    made = telemetry.snapshot().nan_made
    assert made["aten.div"].count == 1
    assert made["aten.div"].modules == ("Normalise",)


def test_a_nan_that_came_in_or_a_finite_result_is_not_counted(spyre: ModuleType) -> None:
    ones = torch.ones(2, 8)
    Normalise()(ones.to("spyre"))
    x = torch.ones(4, dtype=torch.float16).to("spyre")
    nan = x * float("nan")  # a NaN operand, made by a mul (not an op that is checked)
    assert torch.isnan(nan.cpu()).all()
    assert torch.isnan((nan / x).cpu()).all()
    assert telemetry.snapshot().nan_made == {}


def test_an_in_place_division_is_judged_on_its_operands_before_it_wrote(
    spyre: ModuleType,
) -> None:
    zeros = torch.zeros(4, dtype=torch.float16).to("spyre")
    zeros.div_(zeros.clone())
    assert telemetry.snapshot().nan_made["aten.div_"].count == 1
    telemetry.reset()
    already = torch.zeros(4, dtype=torch.float16).to("spyre") * float("nan")
    assert torch.isnan(already.cpu()).all()
    already.div_(torch.ones(4, dtype=torch.float16).to("spyre"))
    assert telemetry.snapshot().nan_made == {}


def test_the_count_travels_through_json_and_merges() -> None:
    snap = telemetry.Snapshot(nan_made={"aten.div": telemetry.GapCount(1, {"CLIPModel": 1})})
    assert telemetry.Snapshot.from_json(snap.to_json()) == snap
    assert telemetry.merge(snap, snap).nan_made["aten.div"].count == 2


def test_what_is_checked() -> None:
    assert {"aten.div", "aten.div_", "aten.sqrt", "aten.log", "aten.var"} <= NAN_MAKERS
    assert not {"aten.add", "aten.mm"} & NAN_MAKERS
    nan = torch.tensor([float("nan")])
    assert made_nan(nan, [torch.zeros(1), 0.0])
    assert not made_nan(nan, [nan])
    assert not made_nan(nan, [torch.zeros(1), float("nan")])
    assert not made_nan(torch.zeros(1), [torch.zeros(1)])
    assert made_nan((torch.zeros(1), nan), [[torch.zeros(1)]])  # tuples and nested operands
    assert not made_nan(nan, [torch.zeros(1)], clean_before=False)
    assert clean([torch.zeros(1), [torch.ones(1)], torch.zeros(1, dtype=torch.long), 1.0])


def test_a_nan_operand_gives_nan_whatever_its_payload(spyre: ModuleType) -> None:
    """DL16 rounding works on the bits: a NaN whose payload is full (PyTorch's half-to-float
    conversion gives 0x7FFFFFFF for fp16's NaN on some CPUs) must not carry into the sign and
    come out as -0, nor a signalling NaN as infinity."""
    from spyre_sim.numerics import round_wide_to_dl16

    patterns = [0x7FFFFFFF, 0x7FC00000, -1, 0x7F800001, -0x400000, 0x3F800000]
    wide = torch.tensor(patterns, dtype=torch.int32).view(torch.float32)
    assert torch.isnan(round_wide_to_dl16(wide)).tolist() == [True] * 5 + [False]
    x = torch.ones(4, dtype=torch.float16).to("spyre")
    nan = x * float("nan")
    for result in (nan + 1, nan / x, nan.exp(), nan @ x):
        assert torch.isnan(result.cpu()).all()
