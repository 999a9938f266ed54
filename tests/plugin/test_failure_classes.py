"""Why a test failed on the device: gap, precision, miscompile, adapter, emulator, platform,
unexplained.

Unit tests of :func:`pytest_spyre.classify.classify`, and ``--spyre`` runs (subprocesses) of a
small suite whose tests fail for each reason, checking the ``spyre`` section, the JSON record
and the summary line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from plugin_runs import Run, pytest_subprocess

from pytest_spyre.classify import classify, innermost_package
from pytest_spyre.precision import tolerance_note
from pytest_spyre.record import TestRecord


def _raised_in(package: str, error: BaseException) -> BaseException:
    """``error`` raised from a function whose code lives in ``<package>/fake.py``."""
    namespace: dict[str, object] = {}
    code = compile("def boom(e):\n    raise e\n", os.path.join("x", package, "fake.py"), "exec")
    exec(code, namespace)
    try:
        namespace["boom"](error)  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("not raised")


def test_innermost_package() -> None:
    exc = _raised_in("spyre_sim", RuntimeError("x"))
    assert innermost_package(exc) == ("spyre_sim", "fake.py:2 in boom")
    assert innermost_package(_raised_in("elsewhere", RuntimeError("x"))) is None


def test_blame_skips_mode_hooks_that_pass_a_call_through() -> None:
    """A helper's call passed through mode hooks raised in the innermost hook: the helper is
    blamed. A hook called straight from non-project code keeps the blame."""
    namespace: dict[str, object] = {}
    for package, source in (
        ("spyre_adapters", "def helper(f, *a):\n    return f(*a)\n"),
        ("spyre_sim", "def __torch_dispatch__(f, *a):\n    return f(*a)\n"),
        ("elsewhere", "def model(f, *a):\n    return f(*a)\n"),
    ):
        exec(compile(source, os.path.join("x", package, "m.py"), "exec"), namespace)
    hook, helper, model = namespace["__torch_dispatch__"], namespace["helper"], namespace["model"]

    def raised(call: object, *args: object) -> BaseException:
        try:
            call(*args)  # type: ignore[operator]
        except BaseException as exc:
            return exc
        raise AssertionError("not raised")

    # int("x") raises in C, as torch's untyped_storage() does: the innermost frame is a hook
    through = raised(helper, hook, hook, int, "x")
    assert innermost_package(through) == ("spyre_adapters", "m.py:2 in helper")
    straight = raised(model, hook, int, "x")
    assert innermost_package(straight) == ("spyre_sim", "m.py:2 in __torch_dispatch__")


def test_classes_in_order() -> None:
    from spyre_adapters.errors import AdapterApplyError
    from spyre_sim import SpyreLoweringError

    rec = TestRecord("t")
    lowering = SpyreLoweringError(op="aten.sin.default", release="2026.05", gap="sin-cos",
                                  reason="no kernel")  # fmt: skip
    applied = AdapterApplyError("rope-rotation", "1.0.0", "matches", ValueError("bad"), [])
    assert classify(applied, rec, [], "DL16").cls == "adapter"
    assert classify(applied, rec, [], "DL16").adapter == "rope-rotation 1.0.0"
    assert classify(_raised_in("spyre_adapters", KeyError("k")), rec, [], "DL16").cls == "adapter"
    gap = classify(lowering, rec, [], "DL16")
    assert (gap.cls, gap.gap) == ("gap", "sin-cos")
    assert classify(_raised_in("spyre_sim", IndexError("i")), rec, [], "DL16").cls == "emulator"
    assert classify(_raised_in("pytest_spyre", IndexError("i")), rec, [], "DL16").cls == "emulator"
    check = {"check": "torch.allclose", "max_abs_diff": 0.002, "max_rel_diff": 0.01,
             "atol": 1e-5, "rtol": 1e-5, "nan": 0}  # fmt: skip
    precise = classify(AssertionError("not close"), rec, [check], "DL16")
    assert precise.cls == "precision"
    assert precise.measured is not None
    assert precise.measured["device_format"] == "DL16"
    assert "max abs diff 0.002" in precise.detail
    miscompiled = TestRecord("t", miscompiles={"sdpa-strided": 2})
    assert classify(AssertionError("x"), miscompiled, [check], "DL16").cls == "miscompile"
    assert classify(AssertionError("x"), rec, [], "DL16").cls == "unexplained"


def test_a_tolerance_finer_than_one_rounding_step_is_named() -> None:
    """Transformers' eager-vs-SDPA check on a device its tolerance table does not list (atol
    1e-7, rtol 1e-4) compared in float16: below half a float16 step, which the failure says;
    in float32 on host dtypes the same tolerance is not flagged, on DL16 it is (DL16's step),
    and a tolerance of one step or more never is."""
    fp16 = {"check": "torch.allclose", "max_abs_diff": 7.6e-6, "max_rel_diff": 9e-4,
            "atol": 1e-7, "rtol": 1e-4, "nan": 0, "dtype": "float16"}  # fmt: skip
    note = tolerance_note(fp16, None)
    assert note is not None
    assert "float16" in note
    assert "0.000488" in note
    fp32 = {**fp16, "dtype": "float32"}
    assert tolerance_note(fp32, None) is None
    dl16 = tolerance_note(fp32, 2.0**-9)
    assert dl16 is not None
    assert "DL16" in dl16
    assert tolerance_note({**fp16, "rtol": 5e-3, "atol": 5e-3}, None) is None
    assert tolerance_note({**fp16, "rtol": None}, None) is None  # a bound check: unknown scale
    failure = classify(AssertionError("not close"), TestRecord("t"), [fp16], "host dtypes")
    assert failure.cls == "precision"
    assert failure.detail.endswith(note)
    assert failure.measured is not None
    assert failure.measured["tolerance_note"] == note


def test_a_number_only_the_emulator_lost_is_its_limit_not_a_miscompile() -> None:
    """CHMv2's ``logits + 1e-8``: DL16 keeps 1e-8, the emulator's fp16 host tensors do not.
    A test that then fails is the emulator's (class ``emulator``, saying so), not the device's
    miscompile and not precision; a miscompile recorded in the same test is named beside it
    (CHMv2's ``clamp_min(1e-12)`` then meets the zero the lost shift left)."""
    check = {"check": "torch.allclose", "max_abs_diff": 0.2, "atol": 1e-5, "rtol": 1e-5}
    limited = TestRecord("t", emulator_limits={"fp16-holder": 4})
    failure = classify(AssertionError("nan"), limited, [check], "DL16")
    assert failure.cls == "emulator"
    assert "fp16 host tensors" in failure.detail
    assert "fp16-holder x4" in failure.detail
    both = TestRecord("t", miscompiles={"eps-underflow": 1}, emulator_limits={"fp16-holder": 1})
    failure = classify(AssertionError("nan"), both, [check], "DL16")
    assert failure.cls == "emulator"
    assert "may have caused: eps-underflow x1" in failure.detail
    again = TestRecord.from_json(limited.to_json())
    assert again.emulator_limits == {"fp16-holder": 4}
    ranged = TestRecord("t", emulator_limits={"fp16-range": 2})
    failure = classify(AssertionError("mismatch"), ranged, [check], "DL16")
    assert failure.cls == "emulator"
    assert "hold +-65472 for numbers beyond 65504" in failure.detail
    assert "fp16-range x2" in failure.detail


def test_a_selection_rounding_decided_makes_a_failure_precision_and_says_so() -> None:
    """A router's top-k whose k-th and (k+1)-th scores were within one DL16 step: a closeness
    failure names the tied selections; an exact comparison (tokens, indices) that fails in such
    a test is precision, naming them, where without them it stays unexplained."""
    ties = {"aten.topk": 3}
    check = {"check": "torch.allclose", "max_abs_diff": 0.4, "atol": 1e-5, "rtol": 1e-5}
    tied = TestRecord("t", rounding_ties=ties)
    failure = classify(AssertionError("not close"), tied, [check], "DL16")
    assert failure.cls == "precision"
    assert "within one DL16 step" in failure.detail
    assert "aten.topk x3 rows" in failure.detail
    assert failure.measured is not None
    assert failure.measured["rounding_ties"] == ties
    exact = classify(AssertionError("Lists differ: [5, 7] != [5, 9]"), tied, [], "DL16")
    assert exact.cls == "precision"
    assert exact.detail.startswith("AssertionError: Lists differ")
    assert "aten.topk x3 rows" in exact.detail
    assert classify(AssertionError("differ"), TestRecord("t"), [], "DL16").cls == "unexplained"
    assert classify(ValueError("bad"), tied, [], "DL16").cls == "unexplained"
    assert TestRecord.from_json(tied.to_json()).rounding_ties == ties


def test_a_nan_the_device_made_makes_a_nan_assertion_precision_and_says_where() -> None:
    """A test that finds NaN in an output where a device result held NaN its operands did not
    (0/0 once DL16 stored tiny numbers as zero): precision, naming the op and module. An
    assertion about something else in such a test stays unexplained."""
    made = TestRecord("t", nan_made={"aten.div": 2}, nan_modules={"aten.div": ["CLIPModel"]})
    failure = classify(AssertionError("Batched output has `nan` in X"), made, [], "DL16")
    assert failure.cls == "precision"
    assert "(aten.div in CLIPModel x2)" in failure.detail
    assert failure.measured == {"nan_made": {"aten.div in CLIPModel": 2}, "device_format": "DL16"}
    rewritten = AssertionError("assert not tensor(True)\n +  where = torch.isnan(...)")
    assert classify(rewritten, made, [], "DL16").cls == "precision"
    assert classify(AssertionError("shapes differ"), made, [], "DL16").cls == "unexplained"
    assert classify(ValueError("nan"), made, [], "DL16").cls == "unexplained"
    check = {"check": "torch.allclose", "max_abs_diff": float("nan"), "nan": 4}
    close = classify(AssertionError("not close"), made, [check], "DL16")
    assert close.cls == "precision"
    assert "device results held NaN their operands did not" in close.detail
    back = TestRecord.from_json(made.to_json())
    assert (back.nan_made, back.nan_modules) == (made.nan_made, made.nan_modules)


def test_float16_refused_where_the_device_stored_float32_is_gap_fp32_storage() -> None:
    """The device keeps float32 as float16; code that does not take float16 refuses it the same
    way on the real device: gap ``fp32-storage``, also below our pass-through mode hooks."""
    namespace: dict[str, object] = {}
    exec(compile("def __torch_function__(f, *a):\n    return f(*a)\n",
                 os.path.join("x", "spyre_adapters", "m.py"), "exec"), namespace)  # fmt: skip
    hook = namespace["__torch_function__"]

    import torch

    try:  # CPU fft refuses float16 in C++: the innermost Python frame is the hook
        hook(torch.fft.fft, torch.ones(4, dtype=torch.half))  # type: ignore[operator]
    except RuntimeError as exc:
        through_hook = exc
    stored = TestRecord("t", gaps={"fp32-storage": 3})
    failure = classify(through_hook, stored, [], "DL16")
    assert (failure.cls, failure.gap) == ("gap", "fp32-storage")
    assert "Unsupported dtype Half" in failure.detail

    def decimal() -> TypeError:
        return TypeError("conversion from numpy.float16 to Decimal is not supported")

    assert classify(_raised_in("torch", decimal()), stored, [], "DL16").gap == "fp32-storage"
    # without a float32 stored as float16 in the test it is not that gap; an adapter's own
    # frame refusing float16 stays the adapter's defect
    assert classify(through_hook, TestRecord("t"), [], "DL16").cls == "adapter"
    own = classify(_raised_in("spyre_adapters", decimal()), stored, [], "DL16")
    assert own.cls == "adapter"
    assert classify(_raised_in("torch", RuntimeError("no")), stored, [], "DL16").gap is None


def test_a_dtype_check_finding_float16_for_float32_is_gap_fp32_storage() -> None:
    """A test that checks the dtype of what the device computed (``assert_close`` of an MoE
    auxiliary loss against a float32 tensor) finds float16, as on the real device: gap
    ``fp32-storage``, ahead of the closeness check the same assertion failed."""
    try:
        torch.testing.assert_close(torch.tensor(2.0, dtype=torch.half), torch.tensor(2.0))
    except AssertionError as exc:
        mismatch = exc
    check = {"check": "torch.testing.assert_close", "max_abs_diff": 0.0}
    stored = TestRecord("t", gaps={"fp32-storage": 1})
    failure = classify(mismatch, stored, [check], "DL16")
    assert (failure.cls, failure.gap) == ("gap", "fp32-storage")
    assert "checked a result's dtype" in failure.detail
    assert "torch.float16 != torch.float32" in failure.detail
    # no float32 stored as float16 in the test: the device did not cause it
    assert classify(mismatch, TestRecord("t"), [check], "DL16").cls == "precision"
    other = AssertionError("torch.int32 != torch.int64")
    assert classify(other, stored, [], "DL16").gap is None
    # a test's own message about float32 dtypes (Transformers 5.25's check that the parameters
    # of `_keep_in_fp32_modules_strict` stay float32)
    own = AssertionError(
        "False is not true : The following parameters/buffers are part of "
        "`_keep_in_fp32_modules_strict` but do not hardcode their dtype in the __init__: ('w',)"
    )
    assert classify(own, stored, [], "DL16").gap == "fp32-storage"
    assert classify(own, TestRecord("t"), [], "DL16").gap is None
    assert classify(AssertionError("False is not true"), stored, [], "DL16").gap is None
    bound = AssertionError("array(0.0016, dtype=float32) not less than or equal to 1e-07")
    assert classify(bound, stored, [], "DL16").gap is None  # a value's repr names its dtype


def test_a_failed_difference_bound_is_a_closeness_check() -> None:
    """``assertLessEqual(max_diff, 1e-5)`` on a floating difference is recorded like allclose;
    other uses of the assertion are not, and the assertion behaves as before."""
    import unittest

    import numpy as np

    from pytest_spyre.precision import ClosenessLog

    log = ClosenessLog()
    case = unittest.TestCase()
    log.install()
    try:
        with pytest.raises(AssertionError, match="not less than or equal to 1e-05"):
            case.assertLessEqual(np.float16(0.0078), 1e-5)  # noqa: PT009
        with pytest.raises(AssertionError):
            case.assertLess(np.float32(0.5), 0.01)  # noqa: PT009
        with pytest.raises(AssertionError):
            case.assertLessEqual(3, 2)  # noqa: PT009 - integers: not a tolerance check
        with pytest.raises(AssertionError):
            case.assertLessEqual(12.0, 10.0)  # noqa: PT009 - a bound of 1 or more: not a tolerance
        case.assertLessEqual(np.float16(1e-6), 1e-5)  # noqa: PT009
    finally:
        log.uninstall()
    assert unittest.TestCase.assertLessEqual.__qualname__ == "TestCase.assertLessEqual"
    assert [f["check"] for f in log.failures] == [
        "assertLessEqual (difference bound)",
        "assertLess (difference bound)",
    ]
    first = log.failures[0]
    assert first["max_abs_diff"] == pytest.approx(0.0078, rel=1e-3)
    assert (first["atol"], first["dtype"]) == (1e-5, "float16")
    failure = classify(AssertionError("x"), TestRecord("t"), log.failures, "DL16")
    assert failure.cls == "precision"
    assert "max abs diff 0.5" in failure.detail


def test_a_failed_bound_on_a_cosine_similarity_is_a_closeness_check() -> None:
    """``assertTrue(1 - F.cosine_similarity(a, b, dim=0).max() <= 1e-3)`` (MaskFormer's and
    LayoutLMv2's batching checks): the last similarity is measured when an assertTrue of a
    false flag fails; a true flag, or a failure with no similarity computed, records nothing."""
    import unittest

    from pytest_spyre.precision import ClosenessLog

    log = ClosenessLog()
    case = unittest.TestCase()
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([1.0, 2.0, 3.5])
    log.install()
    try:
        with pytest.raises(AssertionError):
            case.assertTrue(torch.tensor(True) & False)  # noqa: PT009 - nothing computed yet
        cos = torch.nn.functional.cosine_similarity(a, b, dim=0)
        case.assertTrue(1 - cos <= 0.1)  # noqa: PT009 - passes: nothing recorded
        with pytest.raises(AssertionError, match="is not true"):
            case.assertTrue(1 - cos.max() <= 1e-3)  # noqa: PT009
        log.reset()
        assert log._last_similarity is None
    finally:
        log.uninstall()
    assert torch.nn.functional.cosine_similarity is torch.cosine_similarity
    assert unittest.TestCase.assertTrue.__qualname__ == "TestCase.assertTrue"
    assert log.failures == []  # reset for the next test
    log.install()
    try:
        cos = torch.cosine_similarity(a, b, dim=0)
        with pytest.raises(AssertionError):
            case.assertTrue(1 - cos.max() <= 1e-3)  # noqa: PT009
    finally:
        log.uninstall()
    (check,) = log.failures
    assert check["max_abs_diff"] == pytest.approx(1 - float(cos), rel=1e-6)
    failure = classify(AssertionError("x"), TestRecord("t"), log.failures, "DL16")
    assert failure.cls == "precision"
    assert "cosine similarity" in failure.detail


def test_a_library_refusing_the_device_type_is_platform() -> None:
    """PyTorch's FlexAttention refuses out-of-tree devices by name: class platform, with where."""

    def refusal() -> ValueError:
        return ValueError(
            "FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices. "
            "Found input tensors on spyre device."
        )

    failure = classify(_raised_in("torch", refusal()), TestRecord("t"), [], "DL16")
    assert failure.cls == "platform"
    assert "fake.py:2 in boom" in failure.detail
    # the same words raised by our own code are ours; other errors naming the device are not
    assert (
        classify(_raised_in("spyre_sim", refusal()), TestRecord("t"), [], "DL16").cls == "emulator"
    )
    mixed = RuntimeError("Expected all tensors to be on the same device, spyre:0 and cpu!")
    assert classify(_raised_in("torch", mixed), TestRecord("t"), [], "DL16").cls == "unexplained"


def test_torch_compile_of_device_tensors_is_the_emulators_limit() -> None:
    """Transformers' compile tests on the device end in dynamo (it cannot trace the device's
    tensor subclass): class emulator, saying torch.compile is not emulated."""
    from torch._dynamo.exc import InternalTorchDynamoError

    dynamo = InternalTorchDynamoError(
        'RuntimeError: Attempted to set the storage of a tensor on device "spyre:0" to a '
        'storage on different device "meta".'
    )
    failure = classify(_raised_in("torch", dynamo), TestRecord("t"), [], "DL16")
    assert failure.cls == "emulator"
    assert failure.detail.startswith("torch.compile is not emulated")
    assert "InternalTorchDynamoError" in failure.detail
    wrapped = AssertionError("outputs differ")
    wrapped.__cause__ = dynamo
    assert classify(wrapped, TestRecord("t"), [], "DL16").cls == "emulator"


SUITE = """
import os, subprocess, sys, unittest
import pytest
import torch
import spyre_sim


class Sdpa(torch.nn.Module):
    def forward(self, packed):
        # q, k, v as strided views of one tensor (stick-aligned offsets): the sdpa-strided
        # miscompile of releases before 2026.07
        q, k, v = packed[..., :64], packed[..., 64:128], packed[..., 128:]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _packed():
    return torch.randn(1, 2, 64, 192, generator=torch.Generator().manual_seed(0)).half()


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.proj(x)


def test_precision(spyre_device):
    torch.manual_seed(0)
    model = Linear()
    x = torch.randn(4, 64)
    expected = model(x)
    got = model.to(spyre_device)(x.to(spyre_device))
    torch.testing.assert_close(got.float().cpu(), expected, atol=1e-7, rtol=0)


class BoundTest(unittest.TestCase):
    def test_difference_bound(self):
        torch.manual_seed(0)
        model = Linear()
        x = torch.randn(4, 64)
        expected = model(x)
        got = model.to("spyre")(x.to("spyre")).float().cpu()
        max_diff = (got - expected).abs().max().detach().numpy()
        self.assertLessEqual(max_diff, 1e-7)


class InlineBoundTest(unittest.TestCase):
    def test_inline_bound(self):
        third = torch.tensor(1 / 3).to("spyre")  # the device holds 0.33350, 1.6e-4 away
        self.assertTrue(abs(third.item() - 1 / 3) < 1e-6)

    def test_inline_bound_of_a_call(self):
        third = torch.tensor(1 / 3).to("spyre")
        self.assertTrue(abs(round(third.item(), 8) - 1 / 3) < 1e-6)  # round(): not a plain read


def test_half_refused(spyre_device):
    import decimal
    stored = torch.randn(4, 64).to(spyre_device)  # float32, stored as float16
    decimal.Decimal(stored.cpu().numpy()[0, 0])


def test_miscompile(spyre_device):
    expected = Sdpa()(_packed().float())
    got = Sdpa()(_packed().to(spyre_device)).cpu().float()
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)


class Shift(torch.nn.Module):
    def forward(self, logits):
        # CHMv2: a shift of 1e-8 (a DL16 number; fp16's smallest subnormal is 6e-8) keeps the
        # normaliser of all-zero logits from 0; the device keeps it, and so does the emulator
        # (beside its fp16 host tensor), until the test reads it in fp16
        return logits + 1e-8


class Router(torch.nn.Module):
    def forward(self, scores):
        return scores.topk(1, dim=-1).indices


def test_router_choice(spyre_device):
    # 0.5632 vs 0.5630: one DL16 value; the rows hold them in opposite orders, so the device's
    # tie rule differs from the CPU's choice in one of them
    scores = torch.tensor([[0.5632, 0.5630, 0.1], [0.5630, 0.5632, 0.1]])
    expected = Router()(scores)
    got = Router()(scores.to(spyre_device)).cpu().long()
    assert got.tolist() == expected.tolist()


class Normalise(torch.nn.Module):
    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True)


def test_nan_made(spyre_device):
    # 1e-12 is below DL16's smallest normal: zero on the device, where the CPU divides tiny
    # numbers (a CLIP-style head of a tiny tester model)
    got = Normalise()(torch.full((2, 8), 1e-12).to(spyre_device)).cpu()
    assert not torch.isnan(got).any(), "the output has nan"


def test_emulator_limit(spyre_device):
    got = Shift()(torch.zeros(2, 8).to(spyre_device)).cpu().float()  # read in fp16
    assert (got > 0).all()


def test_emulator_limit_unchecked(spyre_device):
    Shift()(torch.zeros(2, 8).to(spyre_device)).cpu()


@pytest.mark.parametrize("case", ["after", "before", "written", "host"])
def test_limit_and_compare(spyre_device, case):
    torch.manual_seed(0)
    model = Linear().to(spyre_device)
    x = torch.randn(4, 64).to(spyre_device)
    if case == "before":
        Shift()(torch.zeros(2, 8).to(spyre_device)).cpu()  # an emulator limit
    # the same values computed two ways that round differently in DL16 (x * 3 rounds)
    first, second = model(x), model(x * 3) / 3
    if case != "before":
        Shift()(torch.zeros(2, 8).to(spyre_device)).cpu()
    if case == "written":
        first[:2].mul_(1.0)  # written (through a view) after the limit
    if case == "host":
        first, second = first.cpu(), second.cpu()
    torch.testing.assert_close(first, second, atol=1e-7, rtol=0)


def test_miscompile_unchecked(spyre_device):
    assert Sdpa()(_packed().to(spyre_device)).shape == (1, 2, 64, 64)


def test_child_process_gets_the_same_device():
    if os.environ.get("SPYRE_CHILD_PROBE"):
        pytest.skip("the child's own run")
    env = dict(os.environ, SPYRE_CHILD_PROBE="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           __file__ + "::test_child_probe", "-s"],
                          env=env, capture_output=True, text=True)
    expected = f"CHILD STACK 2026.05 numerics={spyre_sim.settings.numerics}"
    assert expected in done.stdout, done.stdout + done.stderr
    assert not os.path.exists(os.path.join(os.path.dirname(__file__), "child-report.json"))


def test_child_probe(spyre_stack):
    if not os.environ.get("SPYRE_CHILD_PROBE"):
        pytest.skip("only in the child")
    print("CHILD STACK", spyre_stack.name, f"numerics={spyre_sim.settings.numerics}")
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("classes")
    (directory / "test_classes.py").write_text(SUITE)
    return directory


@pytest.fixture(scope="module")
def at_2026_05(suite: Path) -> Run:
    return pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.05", "-rA",
                             report=suite / "r.json")  # fmt: skip


def _record(run: Run, name: str) -> dict[str, object]:
    assert run.report is not None
    return next(t for t in run.report["tests"] if t["nodeid"].endswith("::" + name))


def test_precision_failure_says_what_was_measured(at_2026_05: Run) -> None:
    failure = _record(at_2026_05, "test_precision")["failure"]
    assert isinstance(failure, dict)
    assert failure["class"] == "precision"
    measured = failure["measured"]
    assert measured["check"] == "torch.testing.assert_close"
    assert measured["atol"] == 1e-7
    assert measured["max_abs_diff"] > 0
    at_2026_05.fnmatch_lines([
        "precision: a closeness check failed; the device computes in a narrower format",
        "  check:       torch.testing.assert_close on float32 [[]4, 64[]]",
        "  measured:    max abs diff *",
        "  tolerance:   atol 1e-07, rtol 0.0",
        "  device format: DL16*",
    ])  # fmt: skip


def test_a_difference_bound_and_a_float16_refusal_are_classed(at_2026_05: Run) -> None:
    bound = _record(at_2026_05, "test_difference_bound")["failure"]
    assert isinstance(bound, dict)
    assert (bound["class"], bound["measured"]["check"]) == (
        "precision",
        "assertLessEqual (difference bound)",
    )
    assert bound["measured"]["max_abs_diff"] > 0
    half = _record(at_2026_05, "test_half_refused")["failure"]
    assert isinstance(half, dict)
    assert (half["class"], half["gap"]) == ("gap", "fp32-storage")


def test_a_bound_written_inline_in_assert_true_is_measured(at_2026_05: Run) -> None:
    """``self.assertTrue(abs(x.item() - c) < tol)`` (Wav2Vec2's perplexity test): the failed
    call's source is read and the difference measured again, when it only reads variables."""
    inline = _record(at_2026_05, "test_inline_bound")["failure"]
    assert isinstance(inline, dict)
    assert inline["class"] == "precision"
    measured = inline["measured"]
    check = "assertTrue(abs(third.item() - 1 / 3) < 1e-06) (difference bound)"
    assert measured["check"] == check
    assert 1e-4 < measured["max_abs_diff"] < 3e-4
    assert measured["atol"] == 1e-6
    other = _record(at_2026_05, "test_inline_bound_of_a_call")["failure"]
    assert isinstance(other, dict)
    assert other["class"] == "unexplained"


def test_a_miscompile_gets_a_section_on_the_test(at_2026_05: Run) -> None:
    failed = _record(at_2026_05, "test_miscompile")
    assert failed["outcome"] == "failed"
    assert failed["failure"]["class"] == "miscompile"  # type: ignore[index]
    assert failed["miscompiles"] == {"sdpa-strided": 1}
    at_2026_05.fnmatch_lines(
        ["miscompile: the device reproduced documented wrong numbers: sdpa-strided x1"]
    )
    passed = _record(at_2026_05, "test_miscompile_unchecked")
    assert passed["outcome"] == "passed"
    assert passed["miscompiles"] == {"sdpa-strided": 1}
    at_2026_05.fnmatch_lines(
        ["miscompile: the device reproduced documented wrong numbers in this test*"]
    )
    pytest.LineMatcher(at_2026_05.summary).fnmatch_lines(
        [
            "failures by class: gap 1, precision 6, miscompile 1, emulator 4, unexplained 1",
            "miscompiles: sdpa-strided (2 tests)",
        ]
    )


def test_a_choice_rounding_decided_is_precision_and_counted(at_2026_05: Run) -> None:
    failed = _record(at_2026_05, "test_router_choice")
    assert failed["outcome"] == "failed"
    assert failed["rounding_ties"] == {"aten.topk": 2}
    assert failed["failure"]["class"] == "precision"  # type: ignore[index]
    at_2026_05.fnmatch_lines(["*the device decided selections between values within one DL16*"])
    pytest.LineMatcher(at_2026_05.summary).fnmatch_lines(
        ["selections within one DL16 step: aten.topk (1 test) (top-k or argmax rows*"]
    )


def test_a_nan_the_device_made_is_precision_and_counted(at_2026_05: Run) -> None:
    failed = _record(at_2026_05, "test_nan_made")
    assert failed["outcome"] == "failed"
    assert failed["nan_made"] == {"aten.div": 1}
    assert failed["nan_modules"] == {"aten.div": ["Normalise"]}
    assert failed["failure"]["class"] == "precision"  # type: ignore[index]
    at_2026_05.fnmatch_lines(
        ["precision: *the output has nan*device results held NaN their operands did not "
         "(aten.div in Normalise x1): DL16 has no subnormals*"]
    )  # fmt: skip
    pytest.LineMatcher(at_2026_05.summary).fnmatch_lines(
        ["NaN made on the device: aten.div (1 test) (results holding NaN*"]
    )


def test_what_only_the_emulator_loses_is_its_limit(at_2026_05: Run) -> None:
    failed = _record(at_2026_05, "test_emulator_limit")
    assert failed["outcome"] == "failed"
    assert failed["failure"]["class"] == "emulator"  # type: ignore[index]
    assert failed["emulator_limits"] == {"fp16-holder": 1}
    assert failed["miscompiles"] == {}
    passed = _record(at_2026_05, "test_emulator_limit_unchecked")
    assert passed["outcome"] == "passed"
    at_2026_05.fnmatch_lines(["emulator limit: a DL16 number the emulator's fp16 host*"])
    pytest.LineMatcher(at_2026_05.summary).fnmatch_lines(
        ["emulator limits: fp16-holder (6 tests) (DL16 numbers the emulator's*"]
    )
    assert at_2026_05.report is not None
    assert at_2026_05.report["summary"]["emulator_limits"] == {"fp16-holder": 6}


def test_a_limit_met_after_the_compared_values_leaves_the_comparison_to_decide(
    at_2026_05: Run,
) -> None:
    """An emulator limit changes what the emulator computes from where it was met on, not the
    values the device computed before: a closeness check of two device tensors made before the
    test's first limit, and not written since, is judged as the comparison it is (precision);
    values made or written after it, or compared on the host (where nothing says where they
    came from), stay the emulator's limit."""
    after = _record(at_2026_05, "test_limit_and_compare[after]")
    assert after["emulator_limits"] == {"fp16-holder": 1}
    failure = after["failure"]
    assert isinstance(failure, dict)
    assert failure["class"] == "precision", failure
    assert failure["measured"]["limits_after"] == {"fp16-holder": 1}
    at_2026_05.fnmatch_lines([
        "  limits:      emulator limits met in this test (fp16-holder x1) came after the "
        "compared values were computed and did not reach them",
    ])  # fmt: skip
    for name in ("before", "written", "host"):
        failure = _record(at_2026_05, f"test_limit_and_compare[{name}]")["failure"]
        assert isinstance(failure, dict)
        assert failure["class"] == "emulator", (name, failure)
    # no limit in the test: a closeness failure carries no reach at all
    precision = _record(at_2026_05, "test_precision")["failure"]
    assert isinstance(precision, dict)
    assert "limits_reached" not in precision["measured"]
    assert "limits_after" not in precision["measured"]


def test_child_processes_inherit_the_device_settings(suite: Path) -> None:
    run = pytest_subprocess(suite, "--spyre", "--spyre-stack=2026.05", "--spyre-numerics=off",
                            "-k", "child", report=suite / "child-report.json")  # fmt: skip
    assert run.report is not None
    outcome = _record(run, "test_child_process_gets_the_same_device")["outcome"]
    assert outcome == "passed", "\n".join(run.lines)
    # numerics off here, on in the other run: the child saw each parent's setting


def test_a_report_path_that_is_a_directory_is_refused_before_any_test(suite: Path) -> None:
    run = pytest_subprocess(suite, "--spyre", f"--spyre-report={suite}")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "is a directory; give a file path" in run.stderr


def test_asking_for_a_second_device_is_platform_also_from_a_worker_process() -> None:
    """The emulated system is one card: ``set_device(1)`` raises the device's own error, class
    platform. Transformers' tensor-parallel tests hit it in spawned workers, whose exception
    reaches the test as traceback text inside ``ProcessRaisedException``."""
    import spyre_sim
    from spyre_sim.errors import SpyreDeviceIndexError

    spyre_sim.register()
    with pytest.raises(SpyreDeviceIndexError, match="one spyre card") as raised:
        torch.spyre.set_device(1)  # type: ignore[attr-defined]
    assert isinstance(raised.value, ValueError)  # what code catching a bad index expects
    assert raised.value.index == 1
    torch.spyre.set_device(0)  # type: ignore[attr-defined]
    here = classify(raised.value, TestRecord("t"), [], "DL16")
    assert here.cls == "platform"
    assert "spyre:1 does not exist" in here.detail
    assert "worker" not in here.detail

    from torch.multiprocessing.spawn import ProcessRaisedException

    text = (
        "\n\n-- Process 1 terminated with the following error:\nTraceback (most recent call "
        'last):\n  File "spyre_sim/backend.py", line 58, in set_device\n    raise '
        f"SpyreDeviceIndexError(index)\nspyre_sim.errors.SpyreDeviceIndexError: {raised.value}\n"
    )
    worker = classify(ProcessRaisedException(text, 1, 4242), TestRecord("t"), [], "DL16")
    assert worker.cls == "platform"
    assert worker.detail.startswith("needs more devices than the emulated system has (in a worker")
    assert worker.detail.endswith(str(raised.value))
    other = ProcessRaisedException("\nValueError: bad rank\n", 1, 4242)
    assert classify(other, TestRecord("t"), [], "DL16").cls == "unexplained"


def test_a_sections_heading_tells_an_emulator_limit_from_a_defect() -> None:
    """An emulator failure that is a limit of the emulation (torch.compile, a DL16 number the
    fp16 host cannot hold) is not called a bug; a second device asked for is not called a
    library refusing the device type."""
    from pytest_spyre.record import Failure
    from pytest_spyre.recorder import _section

    ranged = classify(
        AssertionError("x"), TestRecord("t", emulator_limits={"fp16-range": 1}), [], "DL16"
    )
    assert _section(ranged, None, []).startswith("emulator limit (")
    bug = classify(_raised_in("spyre_sim", IndexError("i")), TestRecord("t"), [], "DL16")
    assert _section(bug, None, []).startswith("emulator defect (")
    from spyre_sim.errors import SpyreDeviceIndexError

    card = classify(SpyreDeviceIndexError(1), TestRecord("t"), [], "DL16")
    assert _section(card, None, []).startswith(
        "platform (not a gap of the stack): the test needs more devices"
    )
    refused = Failure("platform", "ValueError: FlexAttention is only supported on CUDA")
    assert "refuses the spyre device type" in _section(refused, None, [])


SUBTEST_DTYPE_CHECK = """
import unittest

import torch


class T(unittest.TestCase):
    def test_dtype(self):
        stored = torch.ones(64).to("spyre")  # float32, stored as float16
        with self.subTest("kept in float32"):
            self.assertTrue(stored.dtype == torch.float32, "keeps no float32 dtype")
"""


def test_a_subtest_is_classed_by_what_its_test_recorded_so_far(tmp_path: Path) -> None:
    """A subtest's report is made while its test runs, before the phase's gaps are folded into
    the test's record: its dtype check after float32 was stored as float16 in the same phase is
    gap ``fp32-storage``, as the same check outside a subtest is."""
    (tmp_path / "test_sub.py").write_text(SUBTEST_DTYPE_CHECK)
    run = pytest_subprocess(tmp_path, "--spyre", report=tmp_path / "r.json")
    assert run.report is not None
    (test,) = run.report["tests"]
    assert test["subtests_failed"] == 1
    assert (test["failure"]["class"], test["failure"]["gap"]) == ("gap", "fp32-storage")
