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
