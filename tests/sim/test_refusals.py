"""Refusal handlers: a handled op's refused calls are computed by its handler, nothing else is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import pytest
import torch

from spyre_sim import refusals
from spyre_sim.state import device_state

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

A = torch.ops.aten
POW = A.pow.Tensor_Scalar  # refused at 2026.02 (gap `pow`), lowered from 2026.03


def _x() -> torch.Tensor:
    return torch.full((2, 64), 1.5, dtype=torch.float16, device="spyre")


class Recorder:
    """A handler computing ``x * x`` (exponent 2 only), recording what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, Exception]] = []

    def __call__(
        self, op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: Exception
    ) -> Any:
        self.calls.append((op, args[1], refusal))
        if args[1] != 2:
            raise refusal
        return args[0] * args[0]


def test_a_refused_call_is_computed_by_its_handler_with_its_device_arguments(
    spyre: ModuleType,
) -> None:
    handler = Recorder()
    with (
        spyre.use_stack("2026.02"),
        refusals.handling({POW: handler}),
        spyre.telemetry.record() as rec,
    ):
        out = _x().pow(2)
    assert out.device.type == "spyre"
    assert out.cpu().tolist() == [[2.25] * 64] * 2
    ((op, exponent, refusal),) = handler.calls
    assert (op, exponent) == (POW, 2)
    assert isinstance(refusal, spyre.SpyreLoweringError)
    assert refusal.gap == "pow"
    # the release did refuse the op: the gap is counted as it is without a handler
    assert "pow" in rec.snapshot.to_json()["gaps"]
    assert not device_state.refusal_handlers  # the block took its handler back


def test_a_call_the_release_lowers_never_reaches_the_handler(spyre: ModuleType) -> None:
    handler = Recorder()
    with spyre.use_stack("2026.03"), refusals.handling({POW: handler}):
        assert _x().pow(2).cpu()[0, 0].item() == 2.25
    assert handler.calls == []


def test_a_declined_call_raises_the_release_s_own_error(spyre: ModuleType) -> None:
    handler = Recorder()
    with (
        spyre.use_stack("2026.02"),
        refusals.handling({POW: handler}),
        pytest.raises(spyre.SpyreLoweringError) as refused,
    ):
        _x().pow(3)
    assert refused.value.op == "aten.pow.Tensor_Scalar"
    assert refused.value is handler.calls[0][2]


def test_a_layout_rule_is_never_handled(spyre: ModuleType) -> None:
    calls: list[Any] = []

    def handler(*args: Any) -> Any:
        calls.append(args)
        raise AssertionError("a layout rule reached the handler")

    a = torch.ones(8, 32, dtype=torch.float16, device="spyre")
    b = torch.ones(32, 32, dtype=torch.float16, device="spyre")
    with refusals.handling({A.mm.default: handler}), pytest.raises(spyre.SpyreLayoutError):
        torch.mm(a, b)  # reduction dim 32: not one stick
    assert calls == []


def test_the_handler_s_own_op_is_not_handled_again_while_it_runs(spyre: ModuleType) -> None:
    depth: list[int] = []

    def handler(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: Exception) -> Any:
        depth.append(len(depth))
        assert POW not in refusals.active()
        return op(*args)  # the op itself, on the device: refused, and not handled

    with spyre.use_stack("2026.02"), refusals.handling({POW: handler}):
        with pytest.raises(spyre.SpyreLoweringError):
            _x().pow(2)
        assert POW in refusals.active()  # back once the handler ended
    assert depth == [0]


def test_blocks_nest_and_an_inner_handler_replaces_the_outer_one_for_its_block(
    spyre: ModuleType,
) -> None:
    outer, inner = Recorder(), Recorder()
    with spyre.use_stack("2026.02"), refusals.handling({POW: outer}):
        with refusals.handling({POW: inner}):
            _x().pow(2)
        _x().pow(2)
    assert (len(outer.calls), len(inner.calls)) == (1, 1)
    assert not refusals.active()


def test_a_call_the_inner_handler_declines_goes_to_the_outer_one(spyre: ModuleType) -> None:
    """Two adapters may each compute some calls of one op: the inner block's handler is asked
    first, and what it declines (by raising its refusal) the outer one computes."""

    def cube(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: Exception) -> Any:
        cube_calls.append(args[1])
        if args[1] != 3:
            raise refusal
        return args[0] * args[0] * args[0]

    cube_calls: list[Any] = []
    squares = Recorder()  # exponent 2 only
    with spyre.use_stack("2026.02"), refusals.handling({POW: cube}):
        with refusals.handling({POW: squares}):
            square = _x().pow(2)  # the inner one computes it: the outer is not asked
            third = _x().pow(3)  # the inner declines: the outer computes it
            with pytest.raises(spyre.SpyreLoweringError):
                _x().pow(5)  # both decline: refused as without handlers
        assert cube_calls == [3, 5]
        assert [c[1] for c in squares.calls] == [2, 3, 5]
        _x().pow(3)  # the inner block ended: the outer alone
    assert cube_calls == [3, 5, 3]
    assert torch.equal(square.cpu(), torch.full((2, 64), 2.25, dtype=torch.float16))
    assert torch.equal(third.cpu(), torch.full((2, 64), 3.375, dtype=torch.float16))
    assert not refusals.active()


def test_reset_removes_every_handler(spyre: ModuleType) -> None:
    block = refusals.handling({POW: Recorder()})
    block.__enter__()
    assert refusals.active()
    device_state.reset()
    assert not refusals.active()
