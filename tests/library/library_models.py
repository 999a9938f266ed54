"""Tiny seeded Transformers models and the comparisons the library tests share.

Models are built from configs (no downloads), with every weight redrawn from a seeded normal
distribution large enough that logits depend visibly on position and content, so an adapter
that changed the math would change tokens or logits.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from spyre_adapters.contract import Adapter, ModelEdit
from spyre_adapters.manifest import Manifest
from spyre_adapters.preparation import default_registry
from spyre_adapters.registry import Registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
PROMPT = torch.tensor([[5, 17, 42, 99, 7, 63, 120, 11, 87]])
VOCAB = 256

# the tiny transformer every builder starts from, and its image geometry (32x32, 8x8 patches)
_TINY: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}
_TINY_IMAGES: dict[str, Any] = {**_TINY, "image_size": 32, "patch_size": 8}

# per family: config overrides that keep the model tiny but exercise the pattern
_FAMILY_OVERRIDES: dict[str, dict[str, Any]] = {
    "phi": {"partial_rotary_factor": 0.5},
    "phi3": {"partial_rotary_factor": 0.5},
    "stablelm": {"partial_rotary_factor": 0.25},
    "gpt_neox": {"partial_rotary_factor": 0.25},
    "persimmon": {"partial_rotary_factor": 0.5},
    "gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64},
    "gptj": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "rotary_dim": 8},
    "codegen": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "rotary_dim": 8},
    "t5": {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16},
    "mt5": {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16},
    "umt5": {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16},
    "longt5": {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16},
    "switch_transformers": {
        "d_model": 64,
        "d_ff": 128,
        "num_layers": 2,
        "num_heads": 4,
        "d_kv": 16,
    },
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "num_layers": 2, "window_size": 8},
}


def manifest(name: str, version: str | None = None) -> dict[str, Any]:
    """The manifest of the adapter ``name`` (parsed TOML): ``version``, or the newest."""
    from packaging.version import Version

    files = sorted((MANIFESTS / name).glob("*.toml"), key=lambda p: Version(p.stem))
    assert files, f"no manifest for {name} under {MANIFESTS}"
    chosen = files[-1] if version is None else MANIFESTS / name / f"{version}.toml"
    with chosen.open("rb") as handle:
        return tomllib.load(handle)


def families(name: str, version: str | None = None) -> list[str]:
    return list(manifest(name, version)["families"])


def every_version(name: str) -> dict[str, Any]:
    """Every version of the adapter ``name`` in the manifests folder, oldest first, with the
    object its manifest's entry point names."""
    import importlib

    from packaging.version import Version

    found = {}
    for path in sorted((MANIFESTS / name).glob("*.toml"), key=lambda p: Version(p.stem)):
        module, _, attribute = manifest(name, path.stem)["entry_point"].partition(":")
        found[path.stem] = getattr(importlib.import_module(module), attribute)
    return found


def config_for(model_type: str, **overrides: Any) -> Any:
    from transformers import AutoConfig

    sizes: dict[str, Any] = {
        **_TINY,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": VOCAB,
        "max_position_embeddings": 64,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
    }
    sizes.update(_FAMILY_OVERRIDES.get(model_type, {}))
    sizes.update(overrides)
    return AutoConfig.for_model(model_type, **sizes)


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            fresh = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if param.dim() == 1:
                base = 0.0 if ("bias" in name or _zero_centred_norm(model)) else 1.0
                param.copy_(base + 0.1 * fresh)
            else:
                param.copy_(fresh * (1.0 / param.shape[-1] ** 0.5))
    return model


def _zero_centred_norm(model: nn.Module) -> bool:
    return getattr(getattr(model, "config", None), "model_type", "").startswith("gemma")


def _seeded(auto_class: Any, config: Any, seed: int) -> nn.Module:
    """``auto_class.from_config(config)`` built under ``seed``, weights redrawn, in eval mode."""
    torch.manual_seed(seed)
    return randomize(auto_class.from_config(config), seed).eval()


def causal_lm(model_type: str, seed: int = 0, **overrides: Any) -> nn.Module:
    from transformers import AutoModelForCausalLM

    return _seeded(AutoModelForCausalLM, config_for(model_type, **overrides), seed)


def base_model(model_type: str, seed: int = 0, **overrides: Any) -> nn.Module:
    from transformers import AutoModel

    return _seeded(AutoModel, config_for(model_type, **overrides), seed)


def greedy(
    model: nn.Module, steps: int = 4, prompt: torch.Tensor | None = None, **inputs: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill + ``steps`` greedy decode steps: (generated tokens, per-step logits)."""
    from transformers import GenerationConfig

    gen_config = GenerationConfig(
        do_sample=False,
        max_new_tokens=steps,
        min_new_tokens=steps,
        pad_token_id=0,
        eos_token_id=None,
        bos_token_id=1,
        return_dict_in_generate=True,
        output_logits=True,
    )
    ids = PROMPT if prompt is None else prompt
    with torch.no_grad():
        out = model.generate(  # type: ignore[operator]
            ids, attention_mask=torch.ones_like(ids), generation_config=gen_config, **inputs
        )
    return out.sequences[:, ids.shape[1] :], torch.stack(out.logits)


def assert_same_greedy(
    stock: nn.Module,
    adapted: nn.Module,
    *,
    atol: float = 1e-4,
    prompt: torch.Tensor | None = None,
    **inputs: Any,
) -> None:
    """Identical greedy tokens over prefill + 4 decode steps; logits close too."""
    tokens_ref, logits_ref = greedy(stock, prompt=prompt, **inputs)
    tokens, logits = greedy(adapted, prompt=prompt, **inputs)
    assert torch.equal(tokens, tokens_ref), f"greedy tokens differ: {tokens} vs stock {tokens_ref}"
    assert logits.shape[-1] == logits_ref.shape[-1], "vocab changed"
    diff = (logits - logits_ref).abs().max().item()
    assert diff <= atol, f"logits differ by {diff} (> {atol})"


def last_hidden(model: nn.Module, **inputs: Any) -> torch.Tensor:
    with torch.no_grad():
        out = model(**inputs)
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0))


def state_snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def module_types(model: nn.Module) -> dict[str, type]:
    return {path: type(m) for path, m in model.named_modules()}


def apply(adapter: Adapter, model: nn.Module) -> ModelEdit:
    edit = ModelEdit(model)
    adapter.apply(model, edit)
    return edit


def adapted_pair(
    adapter: Adapter, build: Callable[[str], nn.Module], model_type: str
) -> tuple[nn.Module, nn.Module]:
    """Two twin models built by ``build``: the stock one, and one the adapter matched, was
    applied to and no longer matches."""
    stock, adapted = build(model_type), build(model_type)
    assert adapter.matches(adapted)
    apply(adapter, adapted)
    assert not adapter.matches(adapted), "an adapted model must not match again"
    return stock, adapted


def prompt_logits(model: nn.Module) -> torch.Tensor:
    """The logits of ``PROMPT``, without gradients (the usual rollback probe)."""
    with torch.no_grad():
        return model(PROMPT).logits  # type: ignore[no-any-return]


def assert_rollback_exact(adapter: Adapter, model: nn.Module, probe: Any) -> None:
    """apply then rollback: same state dict (keys and values), module types, outputs, forwards."""
    state = state_snapshot(model)
    types = module_types(model)
    forwards = {path: m.__dict__.get("forward") for path, m in model.named_modules()}
    ref = probe(model)
    edit = apply(adapter, model)
    assert len(edit) > 0, "the adapter changed nothing"
    edit.rollback()
    after = state_snapshot(model)
    assert after.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(after[key], value), key
    assert module_types(model) == types
    assert {path: m.__dict__.get("forward") for path, m in model.named_modules()} == forwards
    out = probe(model)
    assert torch.equal(out, ref)


def decorated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A forward decorator in the manner of Transformers' ``capture_outputs``: a wrapper that
    holds the forward in its closure (adapters must look through it)."""

    @functools.wraps(fn)
    def wrapper(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    return wrapper


def device_runs(
    build: Callable[[], nn.Module], inputs: tuple[Any, ...], adapter_name: str, stack: str
) -> tuple[BaseException, Any]:
    """Prepare two models of ``build`` at ``stack`` (one without adapter ``adapter_name``, one
    with every adapter, which must apply it) and run each on the device with ``inputs``: the
    error the first stops with, and the second's output (on the device). ``AssertionError``
    when the first runs or the second does not apply the adapter."""
    import spyre_adapters
    import spyre_sim

    on_device = tuple(x.to("spyre") if isinstance(x, torch.Tensor) else x for x in inputs)
    with torch.no_grad(), spyre_sim.use_stack(stack):
        plain = build()
        spyre_adapters.prepare(plain, stack, registry=registry_without(adapter_name))
        try:
            plain.to("spyre")(*on_device)
        except spyre_sim.SpyreSimError as error:
            stopped: BaseException = error
        else:
            raise AssertionError(f"the model ran on the device without {adapter_name}")
        adapted = build()
        spyre_adapters.prepare(adapted, stack)
        names = {a.name for a in spyre_adapters.applied(adapted)}
        assert adapter_name in names, f"{adapter_name} not applied: {sorted(names)}"
        return stopped, adapted.to("spyre")(*on_device)


def registry_where(keep: Callable[[Manifest], bool]) -> Registry:
    """The built-in registry with only the adapter versions ``keep`` accepts."""
    return default_registry().where(keep, source="test")


def registry_without(*names: str) -> Registry:
    """The built-in registry without the adapters named ``names`` (every version of each)."""
    return registry_where(lambda m: m.name not in names)


class CallNames(TorchFunctionMode):
    """Records the name of every torch call a torch-function mode entered after it would see
    (``seen``), and runs it unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class AtenRecorder(TorchDispatchMode):
    """Records the ATen op packets (``aten.sin``) a forward reaches."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self.depth = 0
        self.scoped = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self.depth or not self.scoped:
            self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@contextmanager
def recording(within: list[nn.Module] | None = None) -> Iterator[AtenRecorder]:
    """Record ATen ops of everything run inside, or only inside the ``within`` modules."""
    recorder = AtenRecorder()
    handles = []
    if within is not None:
        recorder.scoped = True

        def enter(*_: Any) -> None:
            recorder.depth += 1

        def leave(*_: Any) -> None:
            recorder.depth -= 1

        for module in within:
            handles.append(module.register_forward_pre_hook(enter))
            handles.append(module.register_forward_hook(leave))
    try:
        with torch.no_grad(), recorder:
            yield recorder
    finally:
        for handle in handles:
            handle.remove()


PIXELS = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def vision_model(model_type: str, seed: int = 0, **overrides: Any) -> nn.Module:
    """A tiny vision encoder (32x32 images, 8x8 patches) with seeded random weights."""
    from transformers import AutoConfig, AutoModel

    sizes: dict[str, Any] = {**_TINY_IMAGES, "num_channels": 3}
    sizes.update(overrides)
    return _seeded(AutoModel, AutoConfig.for_model(model_type, **sizes), seed)


IMAGE_TOKEN = 3
IMAGE_TOKENS = 16  # (32 / 8) ** 2 patches
VLM_PROMPT = torch.tensor([[5, 17, *([IMAGE_TOKEN] * IMAGE_TOKENS), 42, 99, 7]])


def vision_language_model(model_type: str, seed: int = 0) -> nn.Module:
    """A tiny image-text model: 32x32 images of 16 patches spliced into a tiny decoder."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    vision: dict[str, Any] = dict(_TINY_IMAGES)
    if model_type == "llava":
        vision["model_type"] = "clip_vision_model"
        text = config_for("llama").to_dict()
        extra: dict[str, Any] = {
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
            "image_seq_length": IMAGE_TOKENS,
        }
    elif model_type == "paligemma":
        vision["model_type"] = "siglip_vision_model"
        text = config_for("gemma").to_dict()
        extra = {"projection_dim": 64}
    else:
        raise ValueError(f"no tiny recipe for {model_type}")
    config = AutoConfig.for_model(
        model_type, vision_config=vision, text_config=text, image_token_id=IMAGE_TOKEN, **extra
    )
    return _seeded(AutoModelForImageTextToText, config, seed)


def encoder(model_type: str, seed: int = 0, **overrides: Any) -> nn.Module:
    """A tiny text encoder (BERT-like) with seeded random weights."""
    from transformers import AutoConfig, AutoModel

    sizes: dict[str, Any] = {
        **_TINY,
        "vocab_size": VOCAB,
        "max_position_embeddings": 64,
        "pad_token_id": 0,
    }
    sizes.update(overrides)
    return _seeded(AutoModel, AutoConfig.for_model(model_type, **sizes), seed)


# tiny codecs: two downsampling stages, a few small codebooks
_TINY_CODECS: dict[str, dict[str, Any]] = {
    "encodec": {
        "hidden_size": 32,
        "num_filters": 8,
        "upsampling_ratios": [4, 2],
        "codebook_size": 64,
        "codebook_dim": 32,
        "num_lstm_layers": 1,
        "target_bandwidths": [3.0],
        "sampling_rate": 1000,
    },
    "mimi": {
        "hidden_size": 32,
        "num_filters": 8,
        "upsampling_ratios": [4, 2],
        "codebook_size": 64,
        "codebook_dim": 32,
        "num_quantizers": 2,
        "num_semantic_quantizers": 1,
        "vector_quantization_hidden_dimension": 32,
        "upsample_groups": 32,
        "num_hidden_layers": 1,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 16,
        "frame_rate": 62.5,  # below the encoder's 125 frames per second: a downsample conv
        "sampling_rate": 1000,
    },
}


def codec(model_type: str, seed: int = 0, **overrides: Any) -> nn.Module:
    """A tiny audio codec (EnCodec, Mimi) with seeded random weights."""
    from transformers import AutoConfig, AutoModel

    sizes = {**_TINY_CODECS[model_type], **overrides}
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.for_model(model_type, **sizes))
    return randomize(model, seed).eval()


def audio(length: int, seed: int = 3) -> torch.Tensor:
    return torch.randn(2, 1, length, generator=torch.Generator().manual_seed(seed))


class PlainSizes(nn.Module):
    """Conv sizes held as Python ints (Qwen3-Omni's code2wav, Parakeet's subsampling), a float
    buffer the sizing methods read and an int buffer they do not: nothing on the device for
    ``host-conv-padding`` to round, so no version of it matches."""

    def __init__(self) -> None:
        super().__init__()
        self.stride, self.kernel_size = 2, 4
        self.scale = nn.Buffer(torch.tensor(2.0))
        self.unused = nn.Buffer(torch.tensor(3))

    def _get_extra_padding_for_conv1d(self, hidden: torch.Tensor) -> int:
        return int(hidden.shape[-1] * self.scale) % self.stride + self.kernel_size

    def _get_output_length(self, lengths: torch.Tensor) -> torch.Tensor:
        return (lengths - self.kernel_size) // self.stride + 1


def assert_stops_then_runs(
    build: Callable[[], nn.Module],
    inputs: Callable[[str], tuple[torch.Tensor, ...]],
    without: Sequence[Adapter],
    with_: Sequence[Adapter],
    *,
    gap: str = "sub-stick-head",
    atol: float = 0.1,
) -> None:
    """At 2026.09 the module from ``build()`` adapted by ``without`` stops at ``gap`` on the
    device; adapted by ``with_`` it runs and matches the CPU (DL16: ``rtol`` 1e-2, ``atol``)."""
    import spyre_sim

    with torch.no_grad():
        expected = build()(*inputs("cpu"))
    with warnings.catch_warnings(), spyre_sim.use_stack("2026.09"), torch.no_grad():
        warnings.simplefilter("ignore")  # the device's once-per-process notices
        stopped = build()
        for adapter in without:
            apply(adapter, stopped)
        with pytest.raises(spyre_sim.SpyreLayoutError) as err:
            stopped.to("spyre")(*inputs("spyre"))
        assert err.value.gap == gap
        model = build()
        for adapter in with_:
            apply(adapter, model)
        out = model.to("spyre")(*inputs("spyre")).cpu().float()
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=atol)


def modes_in(model: nn.Module, where: nn.Module, release: str, *inputs: Any) -> set[type]:
    """The types of the torch function modes running when ``where``'s forward starts, in one
    forward of ``model`` on ``inputs`` at ``release``."""
    from torch.overrides import _get_current_function_mode_stack

    import spyre_sim

    seen: set[type] = set()

    def record(module: nn.Module, args: Any) -> None:
        seen.update(type(m) for m in _get_current_function_mode_stack())

    handle = where.register_forward_pre_hook(record)
    try:
        with spyre_sim.use_stack(release), torch.no_grad():
            model(*inputs)
    finally:
        handle.remove()
    return seen
