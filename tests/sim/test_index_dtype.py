"""Functions that insist on int64 indices, given the int32 the device stores (gap
``int64-storage``)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

_VALUES = torch.arange(20, dtype=torch.float16).reshape(4, 5)
_INDEX = torch.tensor([[0, 4], [2, 3], [1, 1], [0, 0]])


class TakeAlong(torch.nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.take_along_dim(x, index, dim=1)


class OneHot(torch.nn.Module):
    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        return F.one_hot(labels, num_classes=5)


def test_the_device_reports_int32_for_int64(spyre: ModuleType) -> None:
    assert _INDEX.to("spyre").dtype is torch.int32
    with pytest.raises(RuntimeError, match="should be Long"):  # PyTorch's own check, on the host
        torch.take_along_dim(_VALUES, _INDEX.int(), dim=1)


@pytest.mark.parametrize("release", ["2025.12", "2026.05", "2026.09"])
def test_model_scope_names_the_gap(spyre: ModuleType, release: str) -> None:
    with (
        spyre.use_stack(release),
        spyre.configure(judge_harness=False),
        pytest.raises(spyre.SpyreLoweringError) as info,
    ):
        TakeAlong()(_VALUES.to("spyre"), _INDEX.to("spyre"))
    error = info.value
    assert error.gap == "int64-storage"
    assert error.lasting
    assert error.closes_in is None
    assert error.op == "torch.take_along_dim"
    assert error.module_path == "TakeAlong"
    assert error.dtypes == ("float16", "int32")
    assert "requires an int64 index" in str(error)


def test_one_hot_in_the_model_scope_names_the_gap(spyre: ModuleType) -> None:
    with spyre.configure(judge_harness=False), pytest.raises(spyre.SpyreLoweringError) as info:
        OneHot()(torch.tensor([1, 4]).to("spyre"))
    assert info.value.gap == "int64-storage"
    assert info.value.op == "torch.nn.functional.one_hot"


def test_the_harness_gets_host_semantics(spyre: ModuleType) -> None:
    expected = torch.take_along_dim(_VALUES, _INDEX, dim=1)
    with spyre.configure(judge_harness=False):
        x, index = _VALUES.to("spyre"), _INDEX.to("spyre")
        by_function = torch.take_along_dim(x, indices=index, dim=1)
        by_method = x.take_along_dim(index, 1)
        encoded = F.one_hot(torch.tensor([1, 4]).to("spyre"), 5)
    assert by_function.device.type == "spyre"
    assert torch.equal(by_function.cpu(), expected)
    assert torch.equal(by_method.cpu(), expected)
    assert torch.equal(encoded.cpu().long(), F.one_hot(torch.tensor([1, 4]), 5))


def test_judged_harness_names_the_gap(spyre: ModuleType) -> None:
    with pytest.raises(spyre.SpyreLoweringError) as info:  # judge_harness is on by default
        _VALUES.to("spyre").take_along_dim(_INDEX.to("spyre"), 1)
    assert info.value.op == "Tensor.take_along_dim"


def test_functional_mode_keeps_int64(spyre: ModuleType) -> None:
    with spyre.configure(numerics=False):
        index = _INDEX.to("spyre")
        assert index.dtype is torch.int64
        out = TakeAlong()(_VALUES.to("spyre"), index)
    assert torch.equal(out.cpu(), torch.take_along_dim(_VALUES, _INDEX, dim=1))


def test_other_calls_are_untouched(spyre: ModuleType) -> None:
    """Host tensors, int64 indices and errors of the caller's own making pass through as they
    would without the device."""
    assert torch.equal(TakeAlong()(_VALUES, _INDEX), torch.take_along_dim(_VALUES, _INDEX, dim=1))
    with pytest.raises(RuntimeError, match="should be Long"):
        TakeAlong()(_VALUES, _INDEX.int())
    assert getattr(torch.take_along_dim, "__wrapped__", None) is not None  # one wrapper, kept


def test_an_active_function_mode_sees_the_call_first(spyre: ModuleType) -> None:
    """An adapter's TorchFunctionMode handles the call before the device refuses it, as for
    any torch function."""
    from torch.overrides import TorchFunctionMode

    class HostOneHot(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if getattr(func, "__name__", None) == "one_hot":
                return func(args[0].cpu().long(), *args[1:], **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    with spyre.configure(judge_harness=False), HostOneHot():
        out = OneHot()(torch.tensor([1, 4]).to("spyre"))
    assert torch.equal(out, F.one_hot(torch.tensor([1, 4]), 5))
