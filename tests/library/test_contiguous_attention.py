"""contiguous-attention: 1.0 (kernels fed contiguous q/k/v), 1.1 (SDPA itself fed
contiguous q/k/v, wherever the model builds them) and 1.2 (SDPA fed q/k/v with row-major
strides, size-1 dims included: the decode query)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from library_models import (
    PROMPT,
    adapted_pair,
    apply,
    assert_rollback_exact,
    assert_same_greedy,
    causal_lm,
    families,
    greedy,
    prompt_logits,
    registry_where,
)
from torch.overrides import TorchFunctionMode

from spyre_adapters.contract import Adapter
from spyre_adapters.library import (
    contiguous_attention,
    contiguous_attention_v1_1_0,
    contiguous_attention_v1_2_0,
)
from spyre_adapters.library.contiguous_attention_v1_2_0 import row_major_strides

V1_0 = contiguous_attention.adapter
V1_1 = contiguous_attention_v1_1_0.adapter
V1_2 = contiguous_attention_v1_2_0.adapter
VERSIONS = {"1.0.0": V1_0, "1.1.0": V1_1, "1.2.0": V1_2}
FAMILIES = families("contiguous-attention")
# families whose config has a key/value head count: one KV head is multi-query attention
GQA_FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "starcoder2", "granite"]


class SdpaSpy(TorchFunctionMode):
    """Records, for every SDPA call, whether q, k and v were contiguous."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[bool, bool, bool]] = []
        #: per call, whether q, k and v had the strides of a fresh row-major tensor
        self.row_major: list[tuple[bool, bool, bool]] = []
        #: per call, the query's shape
        self.query_shapes: list[tuple[int, ...]] = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            named = dict(zip(("query", "key", "value"), args[:3], strict=False)) | kwargs
            q, k, v = named["query"], named["key"], named["value"]
            self.calls.append((q.is_contiguous(), k.is_contiguous(), v.is_contiguous()))
            self.row_major.append(
                tuple(t.stride() == row_major_strides(t.shape) for t in (q, k, v))  # type: ignore[arg-type]
            )
            self.query_shapes.append(tuple(q.shape))
        return func(*args, **kwargs)


def padded_mask() -> torch.Tensor:
    """A mask with the first token padded: Transformers must build a real mask (with none it
    would pass ``enable_gqa`` instead of repeating k/v)."""
    mask = torch.ones_like(PROMPT)
    mask[:, 0] = 0
    return mask


@contextmanager
def spying() -> Iterator[SdpaSpy]:
    # Entered before the model runs, so the adapter's own mode sits inside it: the spy sees
    # what SDPA finally receives.
    with SdpaSpy() as spy:
        yield spy


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("model_type", FAMILIES)
def test_same_greedy_tokens_as_stock(version: str, model_type: str) -> None:
    stock, adapted = adapted_pair(VERSIONS[version], causal_lm, model_type)
    assert_same_greedy(stock, adapted, atol=0.0)


@pytest.mark.parametrize("version", ["1.1.0", "1.2.0"])
@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("model_type", GQA_FAMILIES)
def test_same_greedy_tokens_as_stock_with_grouped_kv_heads(
    model_type: str, kv_heads: int, version: str
) -> None:
    def build(family: str) -> torch.nn.Module:
        return causal_lm(family, num_key_value_heads=kv_heads)

    stock, adapted = adapted_pair(VERSIONS[version], build, model_type)
    assert_same_greedy(stock, adapted, atol=0.0)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_1_0_kernels_receive_contiguous_qkv(monkeypatch: pytest.MonkeyPatch, attn: str) -> None:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = causal_lm("llama", attn_implementation=attn)
    seen: list[bool] = []
    kernel = ALL_ATTENTION_FUNCTIONS.get_interface(attn, None)
    if kernel is None:  # eager lives in the modeling module, not the registry
        from transformers.models.llama import modeling_llama

        kernel = modeling_llama.eager_attention_forward

    def spy(
        module: torch.nn.Module,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *a: Any,
        **kw: Any,
    ) -> Any:
        seen.append(all(t.is_contiguous() for t in (q, k, v)))
        return kernel(module, q, k, v, *a, **kw)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._local_mapping, attn, spy)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    assert not any(seen)  # stock: transposed views
    seen.clear()
    apply(V1_0, model)
    with torch.no_grad():
        model(PROMPT)
    assert seen
    assert all(seen)


def test_one_kv_head_reaches_sdpa_as_a_stride_0_view_past_1_0() -> None:
    """Why 1.1 exists: with one KV head, Transformers' ``repeat_kv`` inside the sdpa kernel
    merges a size-1 dim into the expanded one, so k/v reach SDPA as stride-0 views even when
    the kernel was handed contiguous tensors (1.0)."""
    model = causal_lm("llama", num_key_value_heads=1)
    apply(V1_0, model)
    with spying() as spy, torch.no_grad():
        model(PROMPT, attention_mask=padded_mask())
    assert spy.calls
    assert all(q and not k and not v for q, k, v in spy.calls)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_1_1_sdpa_receives_contiguous_qkv(kv_heads: int) -> None:
    model = causal_lm("llama", num_key_value_heads=kv_heads)
    with spying() as spy, torch.no_grad():
        model(PROMPT, attention_mask=padded_mask())
    assert spy.calls
    assert not any(all(call) for call in spy.calls)  # stock: strided views
    apply(V1_1, model)
    with spying() as spy, torch.no_grad():
        model(PROMPT, attention_mask=padded_mask())
    assert spy.calls
    assert all(all(call) for call in spy.calls)


@pytest.mark.parametrize("model_type", ["gpt2", "opt"])
def test_1_2_gives_the_decode_query_row_major_strides(model_type: str) -> None:
    """Why 1.2 exists: a decode step's query, the ``[b, 1, h, d]`` projection viewed
    ``[b, h, 1, d]``, is contiguous to torch (its size-1 dim's stride is not looked at), so
    1.1 passes it to SDPA with its heads-inner strides; 1.2 gives it row-major ones."""

    def decode_queries(version: str | None) -> list[tuple[bool, bool, bool, bool]]:
        model = causal_lm(model_type)
        if version is not None:
            apply(VERSIONS[version], model)
        with spying() as spy:
            greedy(model, steps=2)
        return [
            (*rows, contiguous[0])
            for rows, contiguous, shape in zip(
                spy.row_major, spy.calls, spy.query_shapes, strict=True
            )
            if shape[-2] == 1
        ]

    for version in (None, "1.1.0"):
        calls = decode_queries(version)
        assert calls
        assert all(contiguous and not q for q, _, _, contiguous in calls), (version, calls)
    calls = decode_queries("1.2.0")
    assert calls
    assert all(q and k and v for q, k, v, _ in calls), calls


def test_1_2_copies_only_what_is_not_row_major() -> None:
    q = torch.randn(2, 1, 4, 64)
    row_major = contiguous_attention_v1_2_0.row_major
    assert row_major(q) is q
    assert row_major(3) == 3
    decode = q.transpose(1, 2)
    assert decode.is_contiguous()
    assert decode.stride() == (256, 64, 256, 1)
    fresh = row_major(decode)
    assert fresh.stride() == (256, 64, 64, 1)
    assert torch.equal(fresh, decode)
    strided = torch.randn(2, 3, 4, 64).transpose(1, 2)
    assert torch.equal(row_major(strided), strided)
    assert row_major(strided).stride() == row_major_strides((2, 4, 3, 64))
    assert row_major_strides((2, 0, 3)) == (3, 3, 1)


def test_1_1_covers_kernel_made_views_and_keyword_operands() -> None:
    """The sdpa kernel crops k/v to the query length for a causal prefill into a longer
    cache (a slice view), after any wrapper around the kernel has run; and SDPA may be called
    with keyword operands."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module = torch.nn.Module()
    module.is_causal = True
    q = torch.randn(1, 2, 3, 64)
    k = torch.randn(1, 2, 8, 64)  # a cache longer than the query: the kernel slices it
    with spying() as spy:
        with contiguous_attention_v1_1_0.ContiguousSdpaMode():
            sdpa_attention_forward(module, q, k, k.clone(), None, is_causal=True)
            torch.nn.functional.scaled_dot_product_attention(
                query=q, key=k.transpose(-1, -2).transpose(-1, -2)[:, :, :3], value=k[:, :, :3]
            )
        sdpa_attention_forward(module, q, k, k.clone(), None, is_causal=True)
    assert spy.calls == [(True, True, True), (True, True, True), (True, False, False)]


class _DirectSdpa(torch.nn.Module):
    """An attention whose forward calls SDPA itself, not through the attention registry (as
    Falcon's did before Transformers 5.25)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.proj(x).view(1, -1, 1, 64).transpose(1, 2)
        out: torch.Tensor = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        return out


def test_1_1_matches_direct_sdpa_callers_and_covers_every_module() -> None:
    from spyre_adapters.library._scoped_modes import enabled

    direct = torch.nn.Sequential(_DirectSdpa())
    assert V1_1.matches(direct)  # its attention forward calls SDPA itself
    assert V1_2.matches(direct)
    assert not V1_0.matches(direct)  # 1.0 knew only the registry
    llama = causal_lm("llama", num_key_value_heads=1)
    apply(V1_1, llama)
    kinds = {path: set(enabled(m)) for path, m in llama.named_modules()}
    assert all(contiguous_attention_v1_1_0.KIND in k for k in kinds.values())
    # a submodule called on its own runs under the mode too
    layer = llama.get_submodule("model.layers.0")
    hidden = torch.randn(1, 5, 64)
    position = llama.model.rotary_emb(hidden, torch.arange(5)[None])
    mask = torch.zeros(1, 1, 5, 5)
    with spying() as spy, torch.no_grad():
        layer(hidden, attention_mask=mask, position_embeddings=position)
    assert spy.calls == [(True, True, True)]


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_rollback_restores_the_model_exactly(version: str) -> None:
    assert_rollback_exact(VERSIONS[version], causal_lm("llama"), prompt_logits)


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_does_not_match_models_without_attention(version: str) -> None:
    assert not VERSIONS[version].matches(causal_lm("mamba"))


# -- on the device: the failure 1.1 fixes -----------------------------------------------------

ISSUE_CONFIG = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 256,
}


def _device_logits(model: torch.nn.Module, ids: torch.Tensor, release: str) -> torch.Tensor:
    import spyre_sim

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the device's once-per-process downcast notices
        model = model.to("spyre")
        with spyre_sim.use_stack(release), torch.no_grad():
            return model(ids.to("spyre")).logits.cpu().float()  # type: ignore[no-any-return]


def _registry_without(*versions: str) -> Any:
    return registry_where(lambda m: not (m.name == V1_1.name and str(m.version) in versions))


def _issue_model() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**ISSUE_CONFIG)).eval()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        reference = model(ids).logits
    return model, ids, reference


@pytest.mark.parametrize("release", ["2026.05", "2026.06", "2026.07"])
def test_one_kv_head_llama_matches_the_cpu_with_the_resolved_adapters(
    spyre: Any, release: str
) -> None:
    import spyre_adapters

    model, ids, reference = _issue_model()
    prepared = spyre_adapters.prepare(model, stack=release)
    applied = {a.name: str(a.version) for a in prepared.applied}
    assert applied["contiguous-attention"] == "1.2.0"
    spyre.telemetry.reset()
    logits = _device_logits(model, ids, release)
    assert spyre.telemetry.snapshot().to_json()["miscompiles"] == {}
    cos = torch.nn.functional.cosine_similarity(logits.flatten(), reference.flatten(), dim=0)
    assert float(cos) >= 0.999
    assert torch.equal(logits.argmax(-1), reference.argmax(-1))


def test_one_kv_head_llama_reproduces_the_1_0_failure(spyre: Any) -> None:
    """The original report, as it was: with 1.0 the device runs, misreads the stride-0 k/v
    and returns wrong logits (the miscompile shows only in telemetry)."""
    import spyre_adapters

    model, ids, reference = _issue_model()
    prepared = spyre_adapters.prepare(
        model, stack="2026.05", registry=_registry_without("1.1.0", "1.2.0")
    )
    assert {a.name: str(a.version) for a in prepared.applied}["contiguous-attention"] == "1.0.0"
    spyre.telemetry.reset()
    logits = _device_logits(model, ids, "2026.05")
    assert set(spyre.telemetry.snapshot().to_json()["miscompiles"]) == {"sdpa-strided"}
    cos = torch.nn.functional.cosine_similarity(logits.flatten(), reference.flatten(), dim=0)
    assert float(cos) < 0.9
    agreement = (logits.argmax(-1) == reference.argmax(-1)).float().mean()
    assert float(agreement) < 0.5


def test_adapter_objects_satisfy_the_contract() -> None:
    for adapter in VERSIONS.values():
        assert isinstance(adapter, Adapter)
