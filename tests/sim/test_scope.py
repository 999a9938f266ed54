"""Model scope vs harness: which ops the catalogue judges, and what the harness still gets."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


class Square(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.pow(2)


class Generates(torch.nn.Module):
    """A module with a ``generate`` method, like Transformers' generation mixin."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return x.pow(2)  # bookkeeping outside forward, inside a generation call


def _x() -> torch.Tensor:
    return torch.full((2, 64), 1.5, dtype=torch.float16, device="spyre")


def test_every_op_is_judged_by_default(spyre: ModuleType) -> None:
    assert spyre.settings.judge_harness
    with spyre.use_stack("2026.02"), pytest.raises(spyre.SpyreLoweringError) as info:
        _x().pow(2)
    assert info.value.gap == "pow"


def test_harness_ops_get_host_semantics(spyre: ModuleType) -> None:
    with spyre.use_stack("2026.02"), spyre.configure(judge_harness=False):
        with spyre.telemetry.record() as rec:
            out = _x().pow(2)  # would raise in the model scope
            view = torch.ones(13 * 7, dtype=torch.float16, device="spyre").view(13, 7)
        assert out.device.type == "spyre"
        assert float(out.sum().cpu()) == 2 * 64 * 2.25
        assert view.shape == (13, 7)  # a sub-stick view: no layout rule in the harness
    assert rec.snapshot.to_json()["ops"]["aten.pow.Tensor_Scalar"] == {"harness": 1}
    assert rec.snapshot.to_json()["gaps"] == {} or "pow" not in rec.snapshot.to_json()["gaps"]
    assert rec.snapshot.to_json()["errors"] == {}


def test_values_in_the_harness_are_still_device_values(spyre: ModuleType) -> None:
    with spyre.configure(judge_harness=False):
        x = torch.tensor([1.0 + 2.0**-10], device="spyre")  # fp32 on the host
        y = x * 3  # a harness op: its result is stored as the device stores it
    assert x.dtype is torch.float16
    assert y.dtype is torch.float16
    assert float(x.cpu()) == float(spyre.round_to_dl16(torch.tensor([1.0 + 2.0**-10]).half()))


@pytest.mark.parametrize("how", ["forward", "model_scope", "generate"])
def test_model_scope_is_judged_with_the_harness_off(spyre: ModuleType, how: str) -> None:
    x = _x()

    def model_computation() -> None:
        if how == "forward":
            Square()(x)
        elif how == "model_scope":
            with spyre.model_scope():
                assert spyre.in_model_scope()
                x.pow(2)
        else:
            Generates().generate(x)

    with spyre.use_stack("2026.02"), spyre.configure(judge_harness=False):
        assert not spyre.in_model_scope()
        with pytest.raises(spyre.SpyreLoweringError) as info:
            model_computation()
    assert info.value.gap == "pow"
    assert not spyre.in_model_scope()


def test_a_generate_function_that_is_no_module_method_is_harness(spyre: ModuleType) -> None:
    def generate(x: torch.Tensor) -> torch.Tensor:
        return x.pow(2)

    with spyre.use_stack("2026.02"), spyre.configure(judge_harness=False):
        assert float(generate(_x()).sum().cpu()) == 2 * 64 * 2.25


def test_harness_transfers_are_never_refused(spyre: ModuleType) -> None:
    with spyre.use_stack("2025.12"), spyre.configure(judge_harness=False):
        empty = torch.tensor([], dtype=torch.float16).to("spyre")  # zero-length: refused in 2025.12
        flags = torch.tensor([True, False]).to("spyre")  # bool storage: refused in 2025.12
    assert empty.shape == (0,)
    assert flags.dtype is torch.bool
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError):
        torch.tensor([True, False]).to("spyre")


def test_errors_say_where_an_op_first_runs(spyre: ModuleType) -> None:
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as info:
        torch.isin(torch.arange(4).to("spyre"), torch.arange(2).to("spyre"))
    error = info.value
    catalogue = spyre.builtin_catalogue()
    assert error.runs_from == catalogue.first_running("aten.isin", "2025.12", "Tensor_Tensor")
    assert error.runs_from is not None
    assert f"runs (cpu-fallback) from {error.runs_from}" in str(error)


class ScaledSquare(Square):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(64, dtype=torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.scale


def test_errors_in_a_training_step_say_so(spyre: ModuleType) -> None:
    model = ScaledSquare().to("spyre").train()
    x = _x()
    with spyre.use_stack("2026.02"):
        with pytest.raises(spyre.SpyreLoweringError) as info:
            model(x)
        assert info.value.in_training
        with torch.no_grad(), pytest.raises(spyre.SpyreLoweringError) as info:
            model(x)
        assert not info.value.in_training
        with pytest.raises(spyre.SpyreLoweringError) as info:
            Square()(x)  # training mode by default, but nothing to train
        assert not info.value.in_training


def test_hint_providers_see_the_model(spyre: ModuleType) -> None:
    seen: list[object] = []

    def provider(error: object, model: object) -> None:
        seen.append(model)
        error.add_hint("try adapter X")  # type: ignore[attr-defined]

    remove = spyre.hints.add_provider(provider)
    model = Square()
    try:
        with spyre.use_stack("2026.02"), pytest.raises(spyre.SpyreLoweringError) as info:
            model(_x())
    finally:
        remove()
    assert seen == [model]
    assert "hint: try adapter X" in str(info.value)


def test_format_storage_and_data_pointer(spyre: ModuleType) -> None:
    x = torch.tensor(1.25, dtype=torch.float16).to("spyre")
    assert f"{x:.2f}" == "1.25"
    y = torch.ones(2, 64, dtype=torch.float16, device="spyre")
    view = y[1:]
    assert view.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert view.data_ptr() == y.data_ptr() + 64 * 2


def test_every_rule_and_miscompile_names_a_known_gap(spyre: ModuleType) -> None:
    from spyre_sim import _storage, layout, miscompile

    gaps = spyre.builtin_catalogue().gaps
    for rule in layout.rules():
        assert rule.gap in gaps, rule
    for found in miscompile.registered():
        assert found.gap in gaps, found
    for mark in miscompile.registered_marks():
        assert mark.gap in gaps, mark
    for transfer in _storage.transfer_rules():
        assert transfer.gap in gaps, transfer
    for storage in _storage.storage_gaps():
        assert storage.gap in gaps, storage
