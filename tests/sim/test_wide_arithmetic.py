"""The device rounds each result once, from a wide computation, whatever the shape around it.

Before, the emulator ran the host's fp16 kernels and rounded their fp16 results to DL16: two
roundings (a quarter of all values went the wrong way, always away from zero), vectorised
kernels that are not correctly rounded, and accumulations whose order followed the shape, so
the same row gave other DL16 values with left padding or in a batch.
"""

from __future__ import annotations

import warnings
from types import ModuleType

import pytest
import torch

from spyre_sim import _wide_arithmetic
from spyre_sim.numerics import DL16_HOST_MAX, dl16_decode, dl16_encode, round_to_dl16

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def _reference(values: torch.Tensor) -> torch.Tensor:
    """What the device holds for ``values``, by the exact (slow) DL16 encoder."""
    decoded = dl16_decode(dl16_encode(values.double()))
    return decoded.clamp(-DL16_HOST_MAX, DL16_HOST_MAX).to(torch.float16)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    nan = torch.isnan(a)
    return torch.equal(nan, torch.isnan(b)) and torch.equal(a[~nan], b[~nan])


def _midpoints() -> torch.Tensor:
    """Every DL16 midpoint in fp16's normal range, and the float32 neighbours of each."""
    patterns = torch.arange(0x0400, 0x7C00, dtype=torch.int32).to(torch.int16)
    odd = patterns[patterns % 2 == 1].view(torch.float16).float()  # fp16 values between DL16s
    below = torch.nextafter(odd, torch.zeros_like(odd))
    above = torch.nextafter(odd, torch.full_like(odd, float("inf")))
    both = torch.cat([odd, below, above])
    return torch.cat([both, -both])


def test_wide_rounding_matches_the_exact_encoder(spyre: ModuleType) -> None:
    torch.manual_seed(0)
    spread = torch.randn(200_000) * torch.logspace(-9, 6, 200_000)
    special = torch.tensor(
        [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 65472, 65490, 65504, 65520, 1e9]
    )
    values = torch.cat([_midpoints(), spread, special, -special])
    expected = _reference(values)
    assert _same(spyre.round_wide_to_dl16(values), expected)
    assert _same(spyre.round_wide_to_dl16(values.double()), expected)
    strided = values[: 2 * 1000].reshape(1000, 2).t()
    assert _same(spyre.round_wide_to_dl16(strided), _reference(strided))


def test_a_value_just_below_a_midpoint_rounds_down_once() -> None:
    # 1 + 2**-10 is a DL16 midpoint; just below it fp16 rounds up to it, and DL16 then went up
    x = torch.tensor([1 + 2**-10 - 2**-20, -(1 + 2**-10 - 2**-20)])
    old = round_to_dl16(x.half())
    assert old.tolist() == [1 + 2**-9, -(1 + 2**-9)]  # the double rounding
    from spyre_sim.numerics import round_wide_to_dl16

    assert round_wide_to_dl16(x).tolist() == [1.0, -1.0]


def _products_below_midpoints() -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs of DL16 values whose exact product lies strictly between a DL16 midpoint and the
    fp16 value below it: fp16 rounds such a product up to the midpoint."""
    torch.manual_seed(1)
    a = round_to_dl16(torch.rand(20_000, dtype=torch.float16) + 1)
    b = round_to_dl16(torch.rand(20_000, dtype=torch.float16) + 1)
    exact = a.double() * b.double()
    fp16 = exact.half()
    on_midpoint = fp16.view(torch.int16) % 2 == 1
    keep = on_midpoint & (exact < fp16.double())
    assert int(keep.sum()) > 100
    return a[keep], b[keep]


def test_a_product_on_the_device_is_rounded_once(spyre: ModuleType) -> None:
    a, b = _products_below_midpoints()
    got = (a.to("spyre") * b.to("spyre")).cpu()
    assert torch.equal(got, _reference(a.double() * b.double()))
    assert (got < round_to_dl16(a * b)).all()  # the fp16 kernel's double rounding went up
    inplace = a.to("spyre")
    inplace.mul_(b.to("spyre"))
    assert torch.equal(inplace.cpu(), got)


def test_rsqrt_does_not_depend_on_where_a_value_sits(spyre: ModuleType) -> None:
    torch.manual_seed(2)
    values = round_to_dl16(torch.rand(14, dtype=torch.float16) + 0.5)
    longer = torch.cat([round_to_dl16(torch.rand(64, dtype=torch.float16) + 0.5), values])
    # the host's fp16 kernel: vector body and scalar tail disagree
    host_alone, host_inside = torch.rsqrt(longer[:14]), torch.rsqrt(longer)[:14]
    assert not torch.equal(host_alone, host_inside)
    device = longer.to("spyre")
    alone = torch.rsqrt(device[:14].clone()).cpu()
    inside = torch.rsqrt(device).cpu()[:14]
    assert torch.equal(alone, inside)
    assert torch.equal(alone, _reference(torch.rsqrt(longer[:14].double())))


def test_a_row_is_the_same_alone_and_in_a_batch(spyre: ModuleType) -> None:
    torch.manual_seed(3)
    weight = round_to_dl16(torch.randn(64, 128, dtype=torch.float16))
    rows = round_to_dl16(torch.randn(50, 128, dtype=torch.float16))
    w, x = weight.to("spyre"), rows.to("spyre")
    batched = torch.nn.functional.linear(x, w).cpu()
    alone = torch.nn.functional.linear(x[7:8].clone(), w).cpu()
    assert torch.equal(batched[7:8], alone)
    scores = torch.cat([rows[:, :20], torch.full((50, 44), -65472.0, dtype=torch.float16)], 1)
    masked = torch.softmax(scores.to("spyre"), dim=-1).cpu()[:, :20]
    short = torch.softmax(rows[:, :20].to("spyre"), dim=-1).cpu()
    assert torch.equal(masked, short)


def _last_logits(model: torch.nn.Module, ids: torch.Tensor, pad: int) -> torch.Tensor:
    mask = torch.ones_like(ids)
    if pad:
        ids = torch.cat([torch.zeros(ids.shape[0], pad, dtype=ids.dtype), ids], 1)
        mask = torch.cat([torch.zeros(ids.shape[0], pad, dtype=mask.dtype), mask], 1)
    positions = (torch.cumsum(mask, -1) - 1).masked_fill(mask == 0, 1)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
    out = model(**{k: v.to("spyre") for k, v in inputs.items()})
    return out.logits[:, -1].cpu()


@pytest.mark.parametrize("seed", [0, 1])
def test_left_padding_does_not_change_an_adapted_llama_on_the_device(
    spyre: ModuleType, seed: int
) -> None:
    """Transformers' left-padding test at the tester's sizes (the old numerics gave other last
    logits with 32 pad tokens in every one of six seeds)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    import spyre_adapters

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
    )
    model = LlamaForCausalLM(config).eval().to("spyre")
    ids = torch.randint(1, 99, (2, 7))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        spyre_adapters.prepare(model, stack=spyre.current_stack().name)
        assert torch.equal(_last_logits(model, ids, 0), _last_logits(model, ids, 32))


def test_what_is_left_to_the_host_kernels(spyre: ModuleType) -> None:
    from spyre_sim._op_info import OpInfo

    def wide(op: torch._ops.OpOverload) -> torch.dtype | None:
        return OpInfo(op).wide

    aten = torch.ops.aten
    assert wide(aten.mm.default) is torch.float64  # accumulates
    assert wide(aten.mul.Tensor) is torch.float32
    assert wide(aten.mul_.Tensor) is torch.float32  # in place: written back rounded
    assert wide(aten.view.default) is None  # a view
    assert wide(aten.cat.default) is None  # keeps values
    assert wide(aten.unsqueeze_.default) is None  # metadata only
    assert wide(aten.bernoulli.default) is None  # draws random numbers
    assert wide(aten.scaled_dot_product_attention.default) is torch.float64  # unless it drops
    assert wide(aten.mul.out) is None  # out=
    assert wide(aten._to_copy.default) is None  # the cast stores itself
    bf16 = torch.randn(4, 64, dtype=torch.bfloat16)
    got = (bf16.to("spyre") * bf16.to("spyre")).cpu()
    assert torch.equal(got, bf16 * bf16)  # bf16 is native: the host's bf16 kernel


def test_large_products_accumulate_in_float64(spyre: ModuleType) -> None:
    a = round_to_dl16(torch.randn(512, 512, dtype=torch.float16))
    assert 2 * a.numel() > _wide_arithmetic.EXACT_LIMIT
    got = (a.to("spyre") @ a.to("spyre")).cpu()
    assert torch.equal(got, spyre.round_wide_to_dl16(a.double() @ a.double()))


def _spectrograms(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(batch, 2, 160, 1000, generator=generator).half()  # 320,000 per sample
    w = torch.randn(8, 2, 3, 3, generator=generator).half()
    return round_to_dl16(x), round_to_dl16(w)


def test_a_large_convolution_runs_one_sample_at_a_time_in_float32(spyre: ModuleType) -> None:
    x, w = _spectrograms(3)
    assert x[0].numel() > _wide_arithmetic.EXACT_LIMIT
    got = torch.nn.functional.conv2d(x.to("spyre"), w.to("spyre"), padding=1).cpu()
    for i in range(3):
        alone = torch.nn.functional.conv2d(x[i : i + 1].float(), w.float(), padding=1)
        assert torch.equal(got[i : i + 1], spyre.round_wide_to_dl16(alone))
    # a sample is the same alone and in the batch: the float32 path does not hang on the batch
    single = torch.nn.functional.conv2d(x[1:2].to("spyre"), w.to("spyre"), padding=1).cpu()
    assert torch.equal(got[1:2], single)


def test_a_batch_of_small_samples_stays_in_float64(spyre: ModuleType) -> None:
    """Thirteen samples of 65,536 elements: more than the limit together, below it each. The
    choice of width hangs on one sample, so each gets the values it gets alone."""
    generator = torch.Generator().manual_seed(6)
    x = round_to_dl16(torch.randn(13, 1, 1024, 64, generator=generator).half())
    w = round_to_dl16(torch.randn(4, 1, 4, 4, generator=generator).half())
    assert x.numel() > _wide_arithmetic.EXACT_LIMIT >= x[0].numel()
    got = torch.nn.functional.conv2d(x.to("spyre"), w.to("spyre"), stride=4).cpu()
    expected = torch.nn.functional.conv2d(x.double(), w.double(), stride=4)
    assert torch.equal(got, spyre.round_wide_to_dl16(expected))


def test_attention_is_rounded_once_where_the_release_fuses_it(spyre: ModuleType) -> None:
    """SDPA counts as random only when it drops. Where the release runs it as the fused
    flash-attention kernel (2026.07 on) and it drops nothing, it is computed in float64 and
    rounded once (the host's fp16 kernel rounded to fp16 first, then to DL16: a quarter of the
    values away from zero). Where the release runs the math path (2026.05), the host's kernel
    computes it as before."""
    generator = torch.Generator().manual_seed(8)
    q, k, v = (round_to_dl16(torch.randn(2, 3, 9, 16, generator=generator).half()) for _ in "qkv")
    mask = torch.ones(2, 1, 9, 9, dtype=torch.bool).tril()
    mask[1, :, :, :3] = False  # left padding: three keys hidden in the second row
    sdpa = torch.nn.functional.scaled_dot_product_attention
    on_device = [t.to("spyre") for t in (q, k, v, mask)]
    with spyre.use_stack("2026.09"):
        got = sdpa(*on_device[:3], attn_mask=on_device[3]).cpu()
        alone = sdpa(*[t[1:] for t in on_device[:3]], attn_mask=on_device[3][1:]).cpu()
    expected = sdpa(q.double(), k.double(), v.double(), attn_mask=mask)
    assert torch.equal(got, spyre.round_wide_to_dl16(expected))
    assert torch.equal(got[1:], alone)  # a row's values do not depend on the rows beside it
    with spyre.use_stack("2026.05"):
        decomposed = sdpa(*on_device[:3], attn_mask=on_device[3]).cpu()
    assert torch.equal(decomposed, round_to_dl16(sdpa(q, k, v, attn_mask=mask)))


def test_attention_that_drops_is_left_to_the_host_kernel(spyre: ModuleType) -> None:
    q = round_to_dl16(torch.randn(1, 2, 5, 16, dtype=torch.float16))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.manual_seed(3)
    expected = round_to_dl16(sdpa(q, q, q, dropout_p=0.5))
    torch.manual_seed(3)
    got = sdpa(q.to("spyre"), q.to("spyre"), q.to("spyre"), dropout_p=0.5).cpu()
    assert torch.equal(got, expected)  # the same draw from the same generator


def test_a_result_beyond_fp16s_range_keeps_its_dl16_value(spyre: ModuleType) -> None:
    """CPMAnt squares hidden values of 9e3 in its RMS norm: 8.8e7 is a DL16 number, which the
    fp16 host tensors hold as 65472. The result keeps its DL16 value beside them
    (:mod:`spyre_sim._wide_values`), so what is computed from it is the device's; only a read
    of it to the host in fp16 counts the emulator limit (``fp16-range``). A result that
    carries a value already held at the limit (a ``-inf`` mask) or an infinity (``log(0)``)
    is not counted."""
    x = torch.full((1, 4), 300.0, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as run:
        squared = x * x  # 90000 -> DL16 89984
        quarter = (squared / 4).cpu()
    assert quarter.tolist() == [[22496.0] * 4]  # 89984 / 4, not 65472 / 4
    assert run.snapshot.to_json()["emulator_limits"] == {}
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as read:
        held = squared.cpu()
    assert held.tolist() == [[65472.0] * 4]  # the host holds the limit
    assert read.snapshot.to_json()["emulator_limits"]["fp16-range"]["count"] == 1
    mask = torch.tensor([[0.0, float("-inf")]]).to("spyre")  # held as -65472
    zero = torch.zeros(1, 2, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.09"), torch.no_grad(), spyre.telemetry.record() as carried:
        (mask * 2.0, torch.log(zero), zero.new_full((2,), -65504.0))
    assert carried.snapshot.to_json()["emulator_limits"] == {}


def test_weights_are_stored_with_one_rounding(spyre: ModuleType) -> None:
    x = _midpoints()
    assert torch.equal(x.to("spyre").cpu(), _reference(x))
    with spyre.configure(numerics=False):
        assert torch.equal(x.to("spyre").cpu(), x)


def test_uninitialised_results_are_not_widened_nor_range_checked() -> None:
    """``new_empty`` returns whatever the memory held: widening it would round garbage, and a
    range check of it would count an emulator limit by chance (DeepSeek-V3's attention builds
    its query with ``new_empty``: its eager-vs-SDPA test was classed one run by run)."""
    from spyre_sim._op_info import OpInfo

    for op in (
        torch.ops.aten.new_empty.default,
        torch.ops.aten.new_empty_strided.default,
        torch.ops.aten.empty_like.default,
    ):
        assert OpInfo(op).wide is None
    assert OpInfo(torch.ops.aten.add.Tensor).wide is torch.float32


def test_a_nan_beside_a_held_limit_does_not_hide_it() -> None:
    """An operand holding -65472 (a -inf mask as the device holds it) and a NaN elsewhere still
    holds the limit: a result beyond fp16's range is that value carried on, not a new number."""
    from spyre_sim._wide_arithmetic import _held_beyond

    operand = torch.tensor([float("nan"), -65472.0, 1.0], dtype=torch.float16)
    assert _held_beyond([operand])
    assert not _held_beyond([torch.tensor([float("nan"), 1.0], dtype=torch.float16)])


def test_a_call_the_host_kernel_rejects_does_not_stop_the_ops_other_calls(
    spyre: ModuleType,
) -> None:
    """An ``add`` of mismatched sizes raises on the host as on the CPU; the op's other calls
    still run in wide mode and keep a sum beyond fp16's range (once, every later ``add`` of the
    process ran on the held values after such a call)."""
    with spyre.use_stack("2026.09"), torch.no_grad():
        a = torch.ones(2, 3, dtype=torch.float16).to("spyre")
        b = torch.ones(2, 5, dtype=torch.float16).to("spyre")
        for _ in range(2):  # a second identical call is refused again, from the record
            with pytest.raises(RuntimeError, match="must match the size"):
                a + b
        x = torch.full((2, 64), 40000.0, dtype=torch.float16).to("spyre")
        quarter = ((x + x) / 4).cpu()
    assert quarter.unique().tolist() == [20000.0]
