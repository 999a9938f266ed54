"""Triage's size variants: an enabled family is checked again at one key/value head and at odd
sizes, and a failing variant is named without changing the category."""

from __future__ import annotations

from spyre_adapters import Registry, default_registry
from spyre_adapters.enablement.families import build_family
from spyre_adapters.enablement.family_configs import variants_for
from spyre_adapters.enablement.results import Category, TriageResult
from spyre_adapters.enablement.size_presets import MQA, ODD_SIZES, REALISTIC
from spyre_adapters.enablement.triage import build_variants, triage


def _without_contiguous_attention_1_1() -> Registry:
    """The built-in registry with contiguous-attention 1.0.0 its newest version."""
    return default_registry().where(
        lambda m: not (m.name == "contiguous-attention" and str(m.version) in ("1.1.0", "1.2.0"))
    )


def test_variants_are_only_the_ones_that_change_the_build() -> None:
    assert variants_for("llama") == [MQA, ODD_SIZES]
    assert variants_for("gpt2") == [ODD_SIZES]  # no key/value head count to vary
    assert build_variants("llama", preset=ODD_SIZES) == []  # only the realistic preset varies
    odd = build_family("llama", preset=ODD_SIZES)
    assert odd.inputs["input_ids"].shape == (3, 13)
    assert odd.config.vocab_size == 1000
    assert build_family("llama", preset=MQA).config.num_key_value_heads == 1
    assert REALISTIC.batch == 1


def test_the_one_kv_head_variant_shows_what_the_realistic_sizes_hide() -> None:
    """With contiguous-attention 1.0.0 (the version the one-KV-head bug was found in), llama at
    the realistic sizes (2 KV heads of 4) is adapted and matches; the multi-query variant runs
    but does not match, and says it was a miscompile."""
    registry = _without_contiguous_attention_1_1()
    built = build_family("llama")
    result = triage(
        built,
        "2026.05",
        registry=registry,
        list_all_gaps=False,
        variants=build_variants("llama"),
    )
    assert result.category is Category.ADAPTED  # the figure keeps its meaning
    checks = {v.preset: v for v in result.variants}
    assert set(checks) == {"realistic-mqa", "realistic-odd"}
    assert checks["realistic-odd"].ok, checks["realistic-odd"].detail
    assert not checks["realistic-mqa"].ok
    assert checks["realistic-mqa"].miscompiles == ("sdpa-strided",)
    assert "realistic-mqa: runs with adapters but does not match the CPU" in result.detail
    assert not result.variants_ok
    assert TriageResult.from_json(result.to_json()) == result


def test_every_variant_passes_with_the_resolved_adapters() -> None:
    result = triage(
        build_family("llama"), "2026.05", list_all_gaps=False, variants=build_variants("llama")
    )
    assert result.category is Category.ADAPTED
    assert [v.preset for v in result.variants] == ["realistic-mqa", "realistic-odd"]
    assert result.variants_ok, result.detail
