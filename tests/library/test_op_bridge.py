"""Op bridges: a listed ATen op computed by its decomposition or on the host, exactly; both
forms (a dispatch mode around the forward, refusal handlers of the device) alike."""

from __future__ import annotations

import pytest
import torch

import spyre_sim
from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import op_bridge, op_bridge_v2

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

Form = type[op_bridge.OpBridge] | type[op_bridge_v2.OpBridge]
FORMS = pytest.mark.parametrize(
    "OpBridge", [op_bridge.OpBridge, op_bridge_v2.OpBridge], ids=["dispatch-mode", "refusals"]
)


class Clamped(torch.nn.Module):
    """T5's overflow clamp and a loss: ops the device does not lower."""

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        limit = torch.where(torch.isinf(x).any(), 100.0, 1000.0)
        y = torch.clamp(x, -limit, limit)
        return y, torch.nn.functional.cross_entropy(y, labels)


TABLE = {"aten.isinf.default": "decomposition", "aten.nll_loss_forward.default": "host"}


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(6, 64, generator=gen).half(), torch.randint(0, 64, (6,), generator=gen)


@FORMS
def test_the_table_is_checked_when_the_adapter_is_built(OpBridge: Form) -> None:
    with pytest.raises(ValueError, match="no ATen op named"):
        OpBridge({"aten.no_such_op.default": "host"})
    with pytest.raises(ValueError, match="unknown bridge candidate"):
        OpBridge({"aten.isinf.default": "magic"})
    with pytest.raises(ValueError, match=r"no entry in torch\._decomp"):
        OpBridge({"aten.sort.default": "decomposition"})
    with pytest.raises(ValueError, match="at least one op"):
        OpBridge({})


@FORMS
def test_same_results_on_the_cpu_and_undone_by_rollback(OpBridge: Form) -> None:
    x, labels = _inputs()
    model = Clamped()
    stock = model(x.float(), labels)
    edit = ModelEdit(model)
    OpBridge(TABLE).apply(model, edit)
    bridged = model(x.float(), labels)
    for a, b in zip(bridged, stock, strict=True):
        assert torch.equal(a, b)
    edit.rollback()
    assert not any(m.__dict__.get("_spyre_scoped_modes") for m in model.modules())


@FORMS
def test_the_device_runs_the_bridged_ops_and_matches_the_cpu(OpBridge: Form) -> None:
    x, labels = _inputs()
    model = Clamped()
    expected = model(x, labels)
    dev_x, dev_labels = x.to("spyre"), labels.to("spyre")
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        with pytest.raises(spyre_sim.SpyreLoweringError):
            model(dev_x, dev_labels)
        edit = ModelEdit(model)
        OpBridge(TABLE).apply(model, edit)
        with spyre_sim.telemetry.record() as rec:
            got = model(dev_x, dev_labels)
    assert torch.equal(got[0].cpu(), spyre_sim.round_to_dl16(expected[0]))
    assert abs(float(got[1].cpu()) - float(expected[1])) < 1e-2
    # the host candidate moved the loss inputs out and its result back
    assert rec.snapshot.to_json()["transfers"]["device_to_host"] >= 2
    assert "aten.nll_loss_forward.default" not in rec.snapshot.to_json()["ops"]
    assert "aten.isinf.default" not in rec.snapshot.to_json()["ops"]
    assert (
        "aten.abs.default" in rec.snapshot.to_json()["ops"]
    )  # the decomposition reached the device
    edit.rollback()
