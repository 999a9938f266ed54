"""Selections decided within one DL16 step: counted by the device, and replayed to prove a
difference is only that (spyre_sim._selection_ties, spyre_sim.selections)."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

from spyre_sim import telemetry
from spyre_sim._selection_ties import registered, selection_ties, tied_rows
from spyre_sim.numerics import dl16_step
from spyre_sim.selections import Choice, recording, replaying

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

# 0.5632 and 0.5630 are 0.0002 apart, a fifth of DL16's step at 0.56 (2**-10): both round to
# 0.56348. Row 0 and row 1 hold them in opposite orders, so the CPU picks position 0 in one
# and position 1 in the other, and the device, seeing a tie in both, picks the same position in
# both: whatever its tie rule, one row differs from the CPU. Row 2 is decided (0.9 vs 0.3).
SCORES = torch.tensor(
    [
        [0.5632, 0.5630, 0.10, 0.20],
        [0.5630, 0.5632, 0.20, 0.10],
        [0.30, 0.90, 0.20, 0.10],
    ]
)


class Router(torch.nn.Module):
    """An MoE router's selection: the top-1 expert of each token's scores."""

    def forward(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = scores.topk(1, dim=-1)
        return values, indices


def test_the_step_is_dl16s_at_each_magnitude() -> None:
    steps = dl16_step(torch.tensor([1.0, 1.5, 0.56, 0.5, -3.0, 0.0]))
    expected = [2.0**-9, 2.0**-9, 2.0**-10, 2.0**-10, 2.0**-8, 2.0**-30]
    assert steps.tolist() == expected


def test_rows_within_one_step_are_tied_and_others_are_not() -> None:
    rows = tied_rows(SCORES, 1, -1)
    assert rows is not None
    assert rows.tolist() == [True, True, False]
    assert selection_ties(SCORES, 1, -1) == 2
    assert selection_ties(SCORES, 2, -1) == 0  # 0.5630 vs 0.20: decided
    assert tied_rows(SCORES, 4, -1) is None  # nothing is left out
    assert tied_rows(torch.tensor([[1, 1]]), 1, -1) is None  # integers: not rounded
    assert selection_ties(-SCORES, 1, -1, largest=False) == 2
    assert {"aten.topk.default", "aten.argmax.default", "aten.max.dim"} <= set(registered())


def test_the_device_counts_the_rows_it_decided_within_a_step(spyre: ModuleType) -> None:
    Router()(SCORES.to("spyre"))
    ties = telemetry.snapshot().rounding_ties
    assert ties["aten.topk"].count == 2
    assert ties["aten.topk"].modules == ("Router",)
    telemetry.reset()
    with spyre.configure(numerics=False):  # exact host values: nothing rounding decided
        Router()(SCORES.to("spyre"))
    assert telemetry.snapshot().rounding_ties == {}
    snap = telemetry.Snapshot(rounding_ties={"aten.topk": telemetry.GapCount(2, {"Router": 2})})
    assert telemetry.Snapshot.from_json(snap.to_json()) == snap
    assert telemetry.merge(snap, snap).rounding_ties["aten.topk"].count == 4


def test_a_replay_of_the_cpus_choices_makes_the_tied_rows_agree(spyre: ModuleType) -> None:
    with recording() as choices:
        cpu_values, cpu_indices = Router()(SCORES)
    assert [c.indices.tolist() for c in choices] == [[[0], [1], [1]]]
    values, indices = Router()(SCORES.to("spyre"))
    assert not torch.equal(indices.cpu().long(), cpu_indices)  # rounding chose otherwise
    with replaying(choices) as replay:
        values, indices = Router()(SCORES.to("spyre"))
    assert torch.equal(indices.cpu().long(), cpu_indices)
    assert replay.calls == 1
    assert replay.aligned
    assert replay.replaced == 1
    # the values are the device's own at the CPU's indices (DL16 of the CPU's values)
    torch.testing.assert_close(values.cpu().float(), cpu_values, atol=2.0**-10, rtol=0)


def test_a_replay_keeps_the_devices_choice_where_it_was_decided(spyre: ModuleType) -> None:
    """A choice that differs in a row rounding did not tie is not the device's precision:
    the replay leaves it, so a top-k wrong for another reason stays wrong."""
    wrong = Choice((3, 4), 1, -1, True, torch.tensor([[0], [1], [3]]))
    with replaying([wrong]) as replay:
        _, indices = Router()(SCORES.to("spyre"))
    assert indices.cpu()[2].item() == 1
    assert replay.aligned


def test_a_replay_stops_where_the_calls_do_not_line_up(spyre: ModuleType) -> None:
    other = Choice((3, 8), 1, -1, True, torch.zeros(3, 1, dtype=torch.int64))
    with replaying([other]) as replay:
        Router()(SCORES.to("spyre"))
        Router()(SCORES.to("spyre"))
    assert not replay.aligned
    assert replay.replaced == 0
    assert replay.calls == 1  # nothing replayed after the first call that did not line up
    assert "(3, 4)" in replay.mismatched[0]
    with replaying([]) as replay:
        Router()(SCORES.to("spyre"))
    assert not replay.aligned
    assert "the CPU made only 0" in replay.mismatched[0]
