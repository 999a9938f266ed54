"""Layout rules: which shapes trigger each gap, and only while the catalogue keeps it open."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


def _dev(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype).to("spyre")


def test_stick_align_on_linear_k(spyre: ModuleType) -> None:
    with pytest.raises(spyre.SpyreLayoutError) as info:
        _dev(2, 96) @ _dev(96, 64)
    err = info.value
    assert err.gap == "stick-align"
    assert err.lasting
    assert err.closes_in is None
    assert "Unsupported stick expression" in str(err)
    assert (_dev(2, 128) @ _dev(128, 96)).shape == (2, 96)  # N need not be aligned
    with spyre.configure(layout_checks=False):
        assert (_dev(2, 96) @ _dev(96, 64)).shape == (2, 64)


def test_sub_stick_head_view_and_halves(spyre: ModuleType) -> None:
    x = _dev(2, 8, 64)
    with pytest.raises(spyre.SpyreLayoutError, match="host dimension matching stick expr") as info:
        x.view(2, 8, 4, 16)
    assert info.value.gap == "sub-stick-head"
    assert x.view(2, 8, 1, 64).shape == (2, 8, 1, 64)  # head_dim 64: whole sticks
    y = _dev(2, 4, 8, 64)
    with pytest.raises(spyre.SpyreLayoutError) as halves:
        y[..., :32]  # rotate_half on head_dim 64: halves of 32 < 64
    assert halves.value.gap == "sub-stick-head"
    assert _dev(2, 4, 8, 128)[..., 64:].shape == (2, 4, 8, 64)  # head_dim 128 is fine


def test_offset_slice_closes_in_2026_06(spyre: ModuleType) -> None:
    x = _dev(2, 192)
    with spyre.use_stack("2026.05"):
        assert x[:, 64:128].shape == (2, 64)  # stick-aligned offsets are fine
        with pytest.raises(spyre.SpyreLayoutError) as info:
            x[:, 10:100]
        assert info.value.gap == "offset-slice"
        assert info.value.closes_in == "2026.06"
        assert "non-zero offset assertion in stickify" in str(info.value)
        with pytest.raises(spyre.SpyreLayoutError):
            torch.split(x, [100, 92], dim=-1)
    with spyre.use_stack("2026.06"):
        assert x[:, 10:100].shape == (2, 90)


def test_rank_above_three_before_2026_02(spyre: ModuleType) -> None:
    x3 = _dev(2, 4, 64)
    with spyre.use_stack("2025.12"):
        with pytest.raises(spyre.SpyreLayoutError) as info:
            x3.unsqueeze(0)
        assert info.value.gap == "rank-4d"
        assert info.value.closes_in == "2026.02"
        assert (x3 + x3).shape == (2, 4, 64)
    with spyre.use_stack("2026.02"):
        assert x3.unsqueeze(0).shape == (1, 2, 4, 64)


def test_zero_length_before_2026_05(spyre: ModuleType) -> None:
    empty = torch.ones(0, 64, dtype=torch.float16)
    with spyre.use_stack("2026.03"), pytest.raises(spyre.SpyreLayoutError) as info:
        empty.to("spyre")
    assert info.value.gap == "zero-length"
    with spyre.use_stack("2026.05"):
        assert empty.to("spyre").shape == (0, 64)


def test_bf16_before_2026_05_is_a_lowering_error(spyre: ModuleType) -> None:
    x = _dev(2, 64, dtype=torch.bfloat16)
    with spyre.use_stack("2026.03"), spyre.configure(layout_checks=False):
        with pytest.raises(spyre.SpyreLoweringError) as info:
            x + x
        assert info.value.gap == "bf16"
        assert not isinstance(info.value, spyre.SpyreLayoutError)
    with spyre.use_stack("2026.05"):
        assert (x + x).dtype == torch.bfloat16


def test_on_device_upcast_before_2026_07(spyre: ModuleType) -> None:
    x = _dev(2, 64)
    with spyre.use_stack("2026.05"), pytest.raises(spyre.SpyreLoweringError) as info:
        x.to(torch.float32)
    assert info.value.gap == "dtype-cast"
    assert info.value.closes_in == "2026.07"
    with spyre.use_stack("2026.07"):
        assert x.to(torch.float32).device.type == "spyre"


def test_bool_storage_before_2026_02(spyre: ModuleType) -> None:
    mask = torch.ones(2, 64, dtype=torch.bool)
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as info:
        mask.to("spyre")
    assert info.value.gap == "bool-storage"
    with spyre.use_stack("2026.02"):
        assert mask.to("spyre").dtype == torch.bool


def test_settings_switches_are_checked(spyre: ModuleType) -> None:
    with pytest.raises(AttributeError, match="no switch 'layout'"):
        spyre.settings.layout = False
    with pytest.raises(TypeError, match="must be a bool"):
        spyre.settings.numerics = 0
    before = spyre.settings.generation
    spyre.settings.layout_checks = False
    try:
        assert (_dev(2, 96) @ _dev(96, 64)).shape == (2, 64)
    finally:
        spyre.settings.layout_checks = True
    assert spyre.settings.generation == before + 2
    with pytest.raises(spyre.SpyreLayoutError):
        _dev(2, 96) @ _dev(96, 64)


# --- top-k and pow (docs/STACK.md §8) ---------------------------------------------------------


def test_topk_above_four_fails_until_2026_08_with_a_message_for_any_use(
    spyre: ModuleType,
) -> None:
    scores = torch.randn(2, 256, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.07"):
        assert torch.topk(scores, 4).values.shape == (2, 4)
        with pytest.raises(spyre.SpyreLoweringError) as info:
            torch.topk(scores, 50)  # top-k sampling, not MoE routing
    assert info.value.gap == "moe-topk"
    assert info.value.closes_in == "2026.08"
    assert "at most 4 values per call" in str(info.value)
    assert "MoE routing and top-k sampling alike" in str(info.value)
    with spyre.use_stack("2026.08"):
        values = torch.topk(scores, 50).values.cpu()
    assert torch.equal(values, torch.topk(scores.cpu(), 50).values)


@pytest.mark.parametrize(
    ("k", "splits"), [(5, True), (8, True), (37, False), (128, True), (129, False)]
)
def test_topk_k_must_split_over_the_cores_from_2026_08(
    spyre: ModuleType, k: int, splits: bool
) -> None:
    from spyre_sim.layout import topk_split

    assert (topk_split(k) is not None) is splits
    scores = torch.randn(1, 256, dtype=torch.float16).to("spyre")
    with spyre.use_stack("2026.08"):
        if splits:
            assert torch.topk(scores, k).values.shape == (1, k)
        else:
            with pytest.raises(
                spyre.SpyreLoweringError, match="no divisor within 32 cores"
            ) as info:
                torch.topk(scores, k)
            assert info.value.gap == "topk-split"
            assert info.value.closes_in is None


def test_pow_exponents_before_and_after_2026_09(spyre: ModuleType) -> None:
    host = spyre.round_to_dl16(torch.rand(2, 64, dtype=torch.float16) + 0.5)
    x = host.to("spyre")
    with spyre.use_stack("2026.08"):
        assert torch.equal(x.pow(2).cpu(), spyre.round_wide_to_dl16(host.float() * host.float()))
        x.pow(4)  # the multiply chain compiles 2, 3 and 4
        with pytest.raises(spyre.SpyreLoweringError, match=r"exponent -0\.5") as info:
            x.pow(-0.5)  # #3179
    assert info.value.gap == "pow-exponent"
    assert info.value.closes_in == "2026.09"
    with spyre.use_stack("2026.09"):
        torch.testing.assert_close(x.pow(-0.5).cpu(), host.pow(-0.5), atol=2e-3, rtol=2e-3)


def test_pow_of_an_integer_base_and_with_a_tensor_exponent_fail(spyre: ModuleType) -> None:
    ints = torch.arange(64, dtype=torch.int32).reshape(1, 64).to("spyre")
    with pytest.raises(spyre.SpyreLoweringError, match="pow of an integer tensor") as info:
        ints.pow(2)
    assert info.value.gap == "pow-int-base"
    x = torch.rand(1, 64, dtype=torch.float16).to("spyre")
    with pytest.raises(spyre.SpyreLoweringError) as tensor_exponent:
        torch.pow(x, x)
    assert tensor_exponent.value.gap == "pow-tensor-exponent"
    with pytest.raises(spyre.SpyreLoweringError) as scalar_base:
        torch.pow(2.0, x)
    assert scalar_base.value.gap == "pow-tensor-exponent"


def test_layout_rules_are_tried_before_capability_rules(spyre: ModuleType) -> None:
    # the first broken rule decides; the two families live in two modules, which
    # spyre_sim.layout imports layout rules first
    from spyre_sim import layout

    families = [r.layout for r in layout.rules()]
    assert families == sorted(families, reverse=True)
    assert families.count(True) == 7
    assert families.count(False) == 8
