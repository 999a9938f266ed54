from __future__ import annotations

import copy
import types
import warnings

import pytest
import torch
from library_models import (
    PlainSizes,
    apply,
    assert_rollback_exact,
    audio,
    causal_lm,
    codec,
    families,
    state_snapshot,
)
from torch import nn

from spyre_adapters.library.host_conv_padding_v1_1_0 import METHODS, adapter

FAMILIES = families("host-conv-padding", "1.1.0")
PADDING, LENGTH = METHODS
# below 1024 DL16 holds every integer; from 2048 on only multiples of 4
LENGTHS = [1, 2, 3, 7, 64, 1000, 1021, 2047, 2049, 3999, 4000, 4001, 4003, 8191, 16000, 24001]


def outputs(
    model: nn.Module, values: torch.Tensor, **kwargs: torch.Tensor
) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(values, **kwargs)
    return {key: value for key, value in out.items() if isinstance(value, torch.Tensor)}


def methods(model: nn.Module) -> list[tuple[nn.Module, str]]:
    """Every (conv, method) the adapter should take: both methods where the class has them."""
    return [(m, name) for m in model.modules() for name in METHODS if hasattr(type(m), name)]


@pytest.mark.parametrize(
    ("model_type", "causal"),
    [
        pytest.param(family, causal, id=f"{family}-{'causal' if causal else 'centred'}")
        for family in FAMILIES
        for causal in (True, False)
    ],
)
def test_same_outputs_state_and_buffers_as_stock(model_type: str, causal: bool) -> None:
    stock = codec(model_type, use_causal_conv=causal)
    adapted = codec(model_type, use_causal_conv=causal)
    state = state_snapshot(adapted)
    buffered = {n: b.clone() for n, b in adapted.named_buffers()}
    assert adapter.matches(adapted)
    edit = apply(adapter, adapted)
    assert len(edit) == len(methods(adapted)) > 0  # every sizing method of every conv
    assert not adapter.matches(adapted), "an adapted model must not match again"
    for length in (1000, 1021, 2049):
        values = audio(length)
        mask = torch.ones(2, 1, length, dtype=torch.long)
        mask[1, :, length // 3 :] = 0
        ref, out = (
            outputs(stock, values, padding_mask=mask),
            outputs(adapted, values, padding_mask=mask),
        )
        assert ref.keys() == out.keys()
        for key, value in ref.items():
            assert torch.equal(out[key], value), key
    after = state_snapshot(adapted)
    assert after.keys() == state.keys()
    assert all(torch.equal(after[k], v) for k, v in state.items())
    now = dict(adapted.named_buffers())
    assert now.keys() == buffered.keys()
    for name, value in buffered.items():
        assert (now[name].dtype, now[name].shape) == (value.dtype, value.shape), name
        assert torch.equal(now[name], value), name


def test_mimi_takes_both_methods_encodec_the_padding_only() -> None:
    for model_type, expected in (("mimi", {PADDING, LENGTH}), ("encodec", {PADDING})):
        model = codec(model_type)
        apply(adapter, model)
        taken = {name for m in model.modules() for name in METHODS if name in m.__dict__}
        assert taken == expected, model_type
        for module in model.modules():
            for name in METHODS:
                if name in module.__dict__:
                    bound = module.__dict__[name]
                    assert isinstance(bound, types.MethodType)
                    assert bound.__self__ is module
                    assert bound.__name__ == name


@pytest.mark.parametrize("model_type", FAMILIES)
def test_padding_is_the_stock_padding_for_every_length(model_type: str) -> None:
    stock, adapted = codec(model_type), codec(model_type)
    apply(adapter, adapted)
    pairs = [
        (a, b)
        for a, b in zip(stock.modules(), adapted.modules(), strict=True)
        if hasattr(type(a), PADDING)
    ]
    assert pairs
    for length in [*LENGTHS, *range(1, 200)]:
        hidden = torch.zeros(1, 1, length)
        for ref_conv, conv in pairs:
            ref = getattr(ref_conv, PADDING)(hidden)
            out = getattr(conv, PADDING)(hidden)
            assert (out.dtype, out.shape, out.device) == (ref.dtype, ref.shape, ref.device)
            assert torch.equal(out, ref), (length, int(conv.stride), int(conv.kernel_size))


def test_output_lengths_are_the_stock_lengths_for_every_length() -> None:
    stock, adapted = codec("mimi"), codec("mimi")
    apply(adapter, adapted)
    lengths = torch.tensor([*LENGTHS, *range(1, 300)])
    ref = stock.get_encoded_length(lengths)
    out = adapted.get_encoded_length(lengths)
    assert (out.dtype, out.shape, out.device) == (ref.dtype, ref.shape, ref.device)
    assert torch.equal(out, ref)
    conv = adapted.downsample
    # keyword and positional calls, a Python int and a tensor of lengths
    assert torch.equal(
        conv._get_output_length(input_length=lengths), stock.downsample._get_output_length(lengths)
    )
    assert int(conv._get_output_length(torch.tensor(4000))) == int(
        stock.downsample._get_output_length(torch.tensor(4000))
    )


def test_the_host_copies_are_taken_at_apply_time() -> None:
    model = codec("mimi")
    conv = model.downsample
    apply(adapter, model)
    lengths = torch.tensor([1021, 4000])
    before = conv._get_output_length(lengths)
    padding = getattr(conv, PADDING)(torch.zeros(1, 1, 1021))
    with torch.no_grad():
        conv.stride.fill_(3)  # the module's own buffers are not read any more
        conv.kernel_size.fill_(11)
    assert torch.equal(conv._get_output_length(lengths), before)
    assert torch.equal(getattr(conv, PADDING)(torch.zeros(1, 1, 1021)), padding)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_rollback_restores_the_model_exactly(model_type: str) -> None:
    def probe(m: nn.Module) -> torch.Tensor:
        return outputs(m, audio(1021))["audio_values"]

    model = codec(model_type)
    assert_rollback_exact(adapter, model, probe)
    assert all(name not in m.__dict__ for m in model.modules() for name in METHODS)
    assert adapter.matches(model)


def test_does_not_match_models_without_sized_convs() -> None:
    assert not adapter.matches(causal_lm("llama"))
    with pytest.raises(ValueError, match="host-conv-padding does not apply to LlamaForCausalLM"):
        apply(adapter, causal_lm("llama"))

    assert not adapter.matches(nn.Sequential(PlainSizes()))


# ------------------------------------------------------------------------------ on the device


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
def test_on_the_device_stock_lengths_are_wrong_and_adapted_ones_right() -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    stock, adapted = codec("mimi"), codec("mimi")
    apply(adapter, adapted)
    lengths = torch.tensor(LENGTHS)
    expected = copy.deepcopy(stock).get_encoded_length(lengths)
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        stock.to("spyre")
        adapted.to("spyre")
        on_device = lengths.to("spyre")
        wrong = stock.get_encoded_length(on_device)
        right = adapted.get_encoded_length(on_device)
        assert right.device == wrong.device == on_device.device
        assert right.dtype == wrong.dtype
        wrong, right = wrong.cpu(), right.cpu()
    assert torch.equal(right.to(expected.dtype), expected)
    assert not torch.equal(wrong.to(expected.dtype), expected), "the stock lengths should be off"


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
def test_the_audio_codes_mask_on_the_device_is_the_cpu_mask() -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    model = codec("mimi")
    mask = torch.ones(3, 1, 16000, dtype=torch.long)
    mask[1, :, 2049:] = 0
    mask[2, :, 8191:] = 0
    expected = model.get_audio_codes_mask(mask)
    apply(adapter, model)
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")
        got = model.to("spyre").get_audio_codes_mask(mask.to("spyre")).cpu()
    assert got.shape == expected.shape
    assert torch.equal(got.to(expected.dtype), expected)
