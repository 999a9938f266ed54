"""The hint of a blocked run names an op bridge only for the op it bridges."""

from __future__ import annotations

from torch import nn

from spyre_adapters import default_registry
from spyre_adapters.bridging import bridges_for


def test_an_op_bridge_is_named_only_for_its_own_op() -> None:
    registry = default_registry()
    model = nn.Linear(4, 4)  # op bridges match any model
    for_nll = bridges_for(model, "loss", "2026.09", registry, op="aten.nll_loss_forward.default")
    assert [b.name for b in for_nll] == ["bridge-nll-loss-forward"]
    assert for_nll[0].state == "available"
    for_ctc = bridges_for(model, "loss", "2026.09", registry, op="aten._ctc_loss.Tensor")
    assert [b.name for b in for_ctc] == ["bridge-ctc-loss-tensor"]
    for_2d = bridges_for(model, "loss", "2026.09", registry, op="aten.nll_loss2d_forward.default")
    assert [b.name for b in for_2d] == ["bridge-nll-loss2d-forward"]
    other = "aten.multilabel_margin_loss_forward.default"  # no bridge has this op
    assert bridges_for(model, "loss", "2026.09", registry, op=other) == []
    # the op not known: every adapter listing the gap that matches
    assert [b.name for b in bridges_for(model, "loss", "2026.09", registry)] == [
        "bridge-ctc-loss-tensor",
        "bridge-nll-loss-forward",
        "bridge-nll-loss2d-forward",
    ]
