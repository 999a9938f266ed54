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
    registry_without,
    state_snapshot,
    vision_model,
)
from torch import nn

from spyre_adapters.library.host_conv_padding import adapter

FAMILIES = families("host-conv-padding", "1.0.0")
METHOD = "_get_extra_padding_for_conv1d"
# below 1024 DL16 holds every integer; from 2048 on only multiples of 4
LENGTHS = [1, 2, 3, 7, 64, 1000, 1021, 2047, 2049, 3999, 4000, 4001, 4003, 8191]


def outputs(model: nn.Module, values: torch.Tensor) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(values)
    return {key: value for key, value in out.items() if isinstance(value, torch.Tensor)}


def convs(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if hasattr(type(m), METHOD)]


def buffers(model: nn.Module) -> dict[str, tuple[torch.dtype, torch.Size, torch.Tensor]]:
    return {name: (b.dtype, b.shape, b.clone()) for name, b in model.named_buffers()}


CASES = [
    pytest.param(family, causal, id=f"{family}-{'causal' if causal else 'centred'}")
    for family in FAMILIES
    for causal in (True, False)
]


@pytest.mark.parametrize(("model_type", "causal"), CASES)
def test_same_outputs_state_and_buffers_as_stock(model_type: str, causal: bool) -> None:
    stock = codec(model_type, use_causal_conv=causal)
    adapted = codec(model_type, use_causal_conv=causal)
    state, buffered = state_snapshot(adapted), buffers(adapted)
    assert adapter.matches(adapted)
    edit = apply(adapter, adapted)
    assert len(edit) == len(convs(adapted)) > 0  # every padded conv, nothing else
    assert not adapter.matches(adapted), "an adapted model must not match again"
    for length in (1000, 1021, 2049):
        values = audio(length)
        ref, out = outputs(stock, values), outputs(adapted, values)
        assert ref.keys() == out.keys()
        for key, value in ref.items():
            assert torch.equal(out[key], value), key
    after = state_snapshot(adapted)
    assert after.keys() == state.keys()
    assert all(torch.equal(after[k], v) for k, v in state.items())
    assert {k: v[:2] for k, v in buffers(adapted).items()} == {
        k: v[:2] for k, v in buffered.items()
    }
    assert all(torch.equal(buffers(adapted)[k][2], v[2]) for k, v in buffered.items())


@pytest.mark.parametrize("model_type", FAMILIES)
def test_padding_is_the_stock_padding_for_every_length(model_type: str) -> None:
    stock, adapted = codec(model_type), codec(model_type)
    apply(adapter, adapted)
    pairs = list(zip(convs(stock), convs(adapted), strict=True))
    assert {(int(m.stride), int(m.kernel_size)) for m, _ in pairs} >= {(1, 7), (4, 8), (2, 4)}
    for length in [*LENGTHS, *range(1, 300)]:
        hidden = torch.zeros(1, 1, length)
        for ref_conv, conv in pairs:
            ref = getattr(ref_conv, METHOD)(hidden)
            out = getattr(conv, METHOD)(hidden)
            assert isinstance(out, torch.Tensor)
            assert (out.dtype, out.shape, out.device) == (torch.int64, torch.Size([]), ref.device)
            assert torch.equal(out, ref), (length, int(conv.stride), int(conv.kernel_size))
            # the padded input holds a whole number of frames, the fewest that cover it
            stride, kernel, total = int(conv.stride), int(conv.kernel_size), int(conv.padding_total)
            frames = -(-(length - kernel + total) // stride) + 1
            assert int(out) == (frames - 1) * stride + kernel - total - length


def test_the_host_copies_are_taken_at_apply_time() -> None:
    model = codec("encodec")
    conv = convs(model)[0]
    assert "_get_extra_padding_for_conv1d" not in conv.__dict__
    apply(adapter, model)
    hidden = torch.zeros(1, 1, 1021)
    before = getattr(conv, METHOD)(hidden)
    with torch.no_grad():
        conv.stride.fill_(3)  # the module's own buffers are not read any more
        conv.kernel_size.fill_(11)
    assert torch.equal(getattr(conv, METHOD)(hidden), before)
    assert isinstance(conv.__dict__[METHOD], types.MethodType)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_rollback_restores_the_model_exactly(model_type: str) -> None:
    def probe(m: nn.Module) -> torch.Tensor:
        return outputs(m, audio(1021))["audio_values"]

    model = codec(model_type)
    assert_rollback_exact(adapter, model, probe)
    assert all(METHOD not in m.__dict__ for m in model.modules())
    assert adapter.matches(model)


def test_does_not_match_models_without_padded_convs() -> None:
    assert not adapter.matches(causal_lm("llama"))
    assert not adapter.matches(vision_model("vit"))
    with pytest.raises(ValueError, match="host-conv-padding does not apply to LlamaForCausalLM"):
        apply(adapter, causal_lm("llama"))


def test_does_not_match_a_method_without_integer_scalar_buffers() -> None:
    assert not adapter.matches(nn.Sequential(PlainSizes()))


# ------------------------------------------------------------------------------ on the device


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
def test_on_the_device_the_stock_padding_is_wrong_and_the_adapted_one_right() -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    model = codec("encodec")
    stock = [copy.deepcopy(c) for c in convs(model)[:3]]
    apply(adapter, model)
    adapted = convs(model)[:3]
    wrong = 0
    with spyre_sim.use_stack("2026.09"), torch.no_grad():
        for ref_conv, conv in zip(stock, adapted, strict=True):
            ref_conv.to("spyre")
            conv.to("spyre")
            for length in LENGTHS:
                hidden = torch.zeros(1, 1, length)
                expected = getattr(copy.deepcopy(ref_conv).cpu(), METHOD)(hidden)
                out = getattr(conv, METHOD)(hidden.to("spyre"))
                assert torch.equal(out.cpu(), expected), length
                wrong += int(getattr(ref_conv, METHOD)(hidden.to("spyre")).cpu() != expected)
    assert wrong > 0, "the stock padding should be wrong on the device for some length"


# what the stock padding breaks at the family's own 4000 samples: a residual add one stage down
MISMATCH = {"encodec": (2004, 2006), "mimi": (1440, 1444)}


@pytest.mark.filterwarnings("ignore::spyre_sim.SpyreDowncastWarning")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_the_family_runs_on_the_device_where_the_stock_model_fails(model_type: str) -> None:
    spyre_sim = pytest.importorskip("spyre_sim")
    import spyre_adapters
    from spyre_adapters.enablement.families import build_family

    built = build_family(model_type)
    assert built.inputs["input_values"].shape[-1] == 4000
    plain, adapted = copy.deepcopy(built.model), copy.deepcopy(built.model)
    with torch.no_grad():
        ref = built.model(**built.inputs)
    spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
    spyre_adapters.prepare(adapted, "2026.09")
    assert "host-conv-padding" in {a.name for a in spyre_adapters.applied(adapted)}
    values = built.inputs["input_values"].to("spyre")
    got, wanted = MISMATCH[model_type]
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")
        with pytest.raises(
            RuntimeError, match=rf"size of tensor a \({got}\) must match .* \({wanted}\)"
        ):
            plain.to("spyre")(values)
        out = adapted.to("spyre")(values)
        codes, audio_values = out.audio_codes.cpu(), out.audio_values.cpu().float()
    assert torch.equal(codes, ref.audio_codes)
    assert audio_values.shape == ref.audio_values.shape
    cos = torch.nn.functional.cosine_similarity(
        audio_values.flatten(), ref.audio_values.flatten(), 0
    )
    assert cos > 0.999
