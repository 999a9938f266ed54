"""Op bridges: the candidates, the host's transfers and in-place writes, the rewrites, against
the CPU kernels."""

from __future__ import annotations

import copy
import warnings
from types import ModuleType

import pytest
import torch

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import op_bridge, op_bridge_v2
from spyre_adapters.library._op_rewrites import REWRITES
from spyre_adapters.library._scoped_modes import enabled
from spyre_adapters.library.op_bridge import (
    CANDIDATES,
    available,
    candidate,
    cpu_call,
    observe,
    op_name,
    resolve_op,
)
from spyre_adapters.manifest import BRIDGE_CANDIDATES

A = torch.ops.aten
Form = type[op_bridge.OpBridge] | type[op_bridge_v2.OpBridge]
FORMS = pytest.mark.parametrize(
    "OpBridge", [op_bridge.OpBridge, op_bridge_v2.OpBridge], ids=["dispatch-mode", "refusals"]
)


def test_the_manifest_schema_knows_every_candidate_in_order() -> None:
    from spyre_adapters.library import op_bridge_v3

    assert tuple(op_bridge_v3.CANDIDATES) == BRIDGE_CANDIDATES
    assert tuple(CANDIDATES) == BRIDGE_CANDIDATES[:-1]  # the first form's: all but host-float32


def test_available_lists_what_each_table_holds_and_the_host_last() -> None:
    assert available(A.isinf.default) == ["decomposition", "ref", "host"]
    assert available(A.histc.default) == ["rewrite", "host"]
    assert available(A.sort.default) == ["host"]
    # isfinite is only in the core ATen table
    assert available(A.isfinite.default)[0] == "core-decomposition"


def test_the_generator_tries_host_float32_last_where_the_op_writes_no_input() -> None:
    """``spyre-adapters bridge`` tries the first form's candidates, then the third form's
    ``host-float32``; an op that writes an input stays with ``host`` (its writes would land in
    the float32 copies)."""
    from spyre_adapters.enablement import _bridge_candidates as loop

    assert loop.available(A.isinf.default) == [*available(A.isinf.default), "host-float32"]
    assert loop.available(A.sort.default) == ["host", "host-float32"]
    assert loop.available(A.index_put_.default)[-1] == "host"


def test_resolve_and_name_round_trip() -> None:
    op = resolve_op("aten.upsample_nearest2d.vec")
    assert op is A.upsample_nearest2d.vec
    assert op_name(op) == "aten.upsample_nearest2d.vec"
    with pytest.raises(ValueError, match="no ATen op named"):
        resolve_op("aten.no_such_op.default")


def test_a_candidate_the_op_has_not_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no entry in torch\._decomp"):
        candidate(A.sort.default, "decomposition")
    with pytest.raises(ValueError, match="unknown bridge candidate 'magic'"):
        candidate(A.sort.default, "magic")
    with pytest.raises(ValueError, match="has no rewrite candidate"):
        op_bridge.OpBridge({"aten.sort.default": "rewrite"})


def test_cpu_call_widens_a_dtype_the_cpu_kernel_refuses() -> None:
    ids = torch.tensor([0, 1, 1, 3, 3, 3], dtype=torch.int32)
    with pytest.raises(RuntimeError):
        torch.histc(ids, bins=4, min=0, max=3)  # the CPU kernel has no integer histc
    counts = cpu_call(A.histc.default, (ids, 4, 0, 3), {})
    assert counts.dtype is torch.int32
    assert counts.tolist() == [1, 2, 0, 3]
    logits = torch.randn(3, 5).log_softmax(-1)
    target = torch.tensor([1, 0, 4], dtype=torch.int32)  # int64 on the host, int32 on device
    loss, _total = cpu_call(A.nll_loss_forward.default, (logits, target, None, 1, -100), {})
    expected = torch.nn.functional.nll_loss(logits, target.long())
    assert torch.equal(loss, expected)


def test_histc_rewrite_is_the_cpu_kernel() -> None:
    rewrite = REWRITES["aten.histc.default"]
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        values = torch.randn(97, generator=generator) * 3
        for low, high in ((0.0, 0.0), (-2.0, 2.0), (-1.0, 5.0)):
            expected = torch.histc(values, bins=7, min=low, max=high)
            assert torch.equal(rewrite(values, 7, low, high), expected)
    experts = torch.randint(0, 8, (64,), generator=generator).float()
    assert torch.equal(rewrite(experts, 8, 0, 7), torch.histc(experts, bins=8, min=0, max=7))
    constant = torch.full((5,), 2.0)
    assert torch.equal(rewrite(constant, 3, 0, 0), torch.histc(constant, bins=3))


def test_grouped_mm_rewrite_is_the_cpu_kernel() -> None:
    rewrite = REWRITES["aten._grouped_mm.default"]
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(10, 8, generator=generator)
    weights = torch.randn(3, 8, 16, generator=generator)  # the kernel wants 16-byte strides
    offs = torch.tensor([4, 4, 10], dtype=torch.int32)  # the second expert gets no row
    expected = torch._grouped_mm(values, weights, offs=offs)
    torch.testing.assert_close(rewrite(values, weights, offs), expected)
    with pytest.raises(NotImplementedError, match="covers only"):
        rewrite(values, weights)


@FORMS
def test_the_adapter_changes_nothing_on_the_cpu(OpBridge: Form) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Hardtanh())
    stock = copy.deepcopy(model)
    x = torch.randn(4, 8)
    x[0, 0] = float("inf")
    edit = ModelEdit(model)
    OpBridge({"aten.hardtanh.default": "host", "aten.isinf.default": "decomposition"}).apply(
        model, edit
    )
    assert torch.equal(model(x), stock(x))
    edit.rollback()
    assert not enabled(model)


@FORMS
def test_only_refused_calls_are_bridged_and_observers_see_them(
    spyre: ModuleType, OpBridge: Form
) -> None:
    model = torch.nn.Sequential(torch.nn.Hardtanh())
    edit = ModelEdit(model)
    OpBridge({"aten.sort.default": "host", "aten.hardtanh.default": "host"}).apply(model, edit)
    seen: list[str] = []

    class Sorts(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sort(model(x)).values

    sorts = Sorts()
    OpBridge({"aten.sort.default": "host"}).apply(sorts, ModelEdit(sorts))
    with observe(lambda op, args, kwargs: seen.append(op_name(op))), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(8, dtype=torch.float16)
        out = sorts(x.to("spyre")).cpu()
    assert torch.equal(out, spyre.round_to_dl16(torch.sort(torch.nn.functional.hardtanh(x)).values))
    # sort is refused at the release and goes to the host; hardtanh runs as it would anyway
    assert seen == ["aten.sort.default"]
    # on the CPU nothing is refused: nothing is bridged
    seen.clear()
    with observe(lambda op, args, kwargs: seen.append(op_name(op))):
        sorts(x.float())
    assert seen == []


def test_host_candidate_on_the_device_moves_and_writes_back(spyre: ModuleType) -> None:
    host = CANDIDATES["host"]
    with spyre.model_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = torch.tensor([3, 1, 2, 0]).to("spyre")
        before = spyre.telemetry.snapshot().to_json()["transfers"]
        values, order = host(A.sort.default, (ids,), {})
        after = spyre.telemetry.snapshot().to_json()["transfers"]
        assert values.device.type == "spyre"
        assert values.cpu().tolist() == [0, 1, 2, 3]
        assert order.cpu().tolist() == [3, 1, 2, 0]
        assert after["device_to_host"] > before["device_to_host"]
        assert after["host_to_device"] > before["host_to_device"]
        # an in-place op writes into the device tensor it was given, and returns it
        target = torch.zeros(4, dtype=torch.float16).to("spyre")
        index = torch.tensor([0, 2]).to("spyre")
        source = torch.ones(2, dtype=torch.float16).to("spyre")
        out = host(A.index_put_.default, (target, [index], source), {})
        assert out is target
        assert target.cpu().tolist() == [1.0, 0.0, 1.0, 0.0]


def test_bridged_ops_inside_a_decomposition_use_their_own_candidate(spyre: ModuleType) -> None:
    # at 2026.05 both nll_loss and the gather its decomposition issues are refused
    mode = op_bridge.BridgeMode(
        {A.nll_loss_forward.default: CANDIDATES["decomposition"], A.gather.default: _refuse}
    )
    with spyre.use_stack("2026.05"), warnings.catch_warnings(), spyre.model_scope():
        warnings.simplefilter("ignore")
        logits = torch.randn(3, 64).half().log_softmax(-1).to("spyre")
        target = torch.tensor([1, 0, 4]).to("spyre")
        with pytest.raises(RuntimeError, match="the gather of the decomposition was bridged"), mode:
            A.nll_loss_forward.default(logits, target, None, 1, -100)


def _refuse(op: object, args: object, kwargs: object) -> None:
    raise RuntimeError("the gather of the decomposition was bridged")


def test_the_refusal_form_bridges_a_decomposition_s_refused_ops_and_matches_the_cpu(
    spyre: ModuleType,
) -> None:
    # at 2026.05 both nll_loss and the gather its decomposition issues are refused: the
    # decomposition runs on the device and its gather goes to the host
    class Loss(torch.nn.Module):
        def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.nll_loss(logits, target)

    model = Loss()
    table = {"aten.nll_loss_forward.default": "decomposition", "aten.gather.default": "host"}
    op_bridge_v2.OpBridge(table).apply(model, ModelEdit(model))
    logits = torch.randn(3, 64).half().log_softmax(-1)
    target = torch.tensor([1, 0, 4])
    seen: list[str] = []
    with spyre.use_stack("2026.05"), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        with observe(lambda op, args, kwargs: seen.append(op_name(op))):
            got = model(logits.to("spyre"), target.to("spyre")).cpu()
    expected = torch.nn.functional.nll_loss(spyre.round_to_dl16(logits).float(), target)
    assert abs(float(got) - float(expected)) < 1e-2
    assert seen == ["aten.nll_loss_forward.default", "aten.gather.default"]


def test_the_refusal_form_leaves_a_call_its_candidate_cannot_take_refused(
    spyre: ModuleType,
) -> None:
    # the rewrite of pow takes some exponents only (0.5 is sqrt): any other stays refused, with
    # the release's own error
    class Power(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.pow(x, 2.7)

    from spyre_adapters.library import _pow_rewrites  # noqa: F401  (registers the rewrite)

    model = Power()
    edit = ModelEdit(model)
    op_bridge_v2.OpBridge({"aten.pow.Tensor_Scalar": "rewrite"}).apply(model, edit)
    with spyre.use_stack("2026.05"), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        x = torch.rand(4, 64).half() + 0.5
        with pytest.raises(spyre.SpyreLoweringError) as refused:
            model(x.to("spyre"))
        assert refused.value.op == "aten.pow.Tensor_Scalar"
        model.forward = lambda x: torch.pow(x, 0.5)  # type: ignore[method-assign]
        got = model(x.to("spyre")).cpu()
    assert torch.allclose(got.float(), spyre.round_to_dl16(x).float().sqrt(), rtol=1e-2)
    del model.forward
    edit.rollback()
    assert not enabled(model)
