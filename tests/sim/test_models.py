"""Evidence with tiny Transformers models built from configs (random weights, no downloads).

The tiny configs (hidden 64, head_dim 16) break two *lasting* layout rules: heads of 16
elements split the 64-element stick (``sub-stick-head``) and rotate_half halves them again.
Tests that run them end to end therefore switch layout checks off
(``configure(layout_checks=False)``); ``test_stick_friendly_llama_runs_with_layout_checks``
uses a config that satisfies every layout rule (hidden 256, head_dim 128) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")

transformers = pytest.importorskip("transformers")

VOCAB = 128


def _llama(hidden: int = 64, heads: int = 4, layers: int = 2) -> Any:
    config = transformers.LlamaConfig(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return _build(transformers.LlamaForCausalLM, config)


def _gpt2() -> Any:
    config = transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64
    )
    return _build(transformers.GPT2LMHeadModel, config)


def _bert() -> Any:
    config = transformers.BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return _build(transformers.BertModel, config)


def _build(cls: Any, config: Any) -> Any:
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return cls(config).eval()


def _ids(batch: int = 2, seq: int = 16) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(1))


def _output(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(ids)
    tensor = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return tensor.cpu().float()  # type: ignore[no-any-return]


def _on_device(model: Any) -> Any:
    clone = type(model)(model.config).eval()
    clone.load_state_dict(model.state_dict())
    return clone.to("spyre")


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0))


def _fixed(tmp_path: Path, *gaps: str) -> Path:
    path = tmp_path / "fixed.toml"
    states = "\n".join(f'{g} = "closed"' for g in gaps)
    path.write_text(
        'schema_version = 1\n[release]\nname = "2026.11"\nbase = "2026.09"\n'
        f'date = 2026-11-20\nsummary = "2026.09 with {", ".join(gaps)} fixed"\n'
        f"[gaps]\n{states}\n"
    )
    return path


def test_stock_llama_at_2025_12_names_the_first_op_it_cannot_lower(spyre: ModuleType) -> None:
    model = _on_device(_llama())
    ids = _ids().to("spyre")
    with spyre.use_stack("2025.12"), pytest.raises(spyre.SpyreLoweringError) as info:
        _output(model, ids)
    err = info.value
    assert err.op == "aten.embedding.default"
    assert err.gap == "embedding"
    assert err.closes_in == "2026.08"
    assert err.module_path == "model.embed_tokens"
    assert err.release == "2025.12"
    assert "model.embed_tokens" in str(err)


def test_llama_at_2026_09_runs_and_records_the_rotate_half_miscompile(
    spyre: ModuleType, tmp_path: Path
) -> None:
    cpu = _llama()
    ids = _ids()
    reference = _output(cpu, ids)
    model = _on_device(cpu)
    with spyre.use_stack("2026.09"), spyre.configure(layout_checks=False):
        with spyre.telemetry.record() as rec:
            miscompiled = _output(model, ids.to("spyre"))
        with spyre.use_stack(_fixed(tmp_path, "rotate-half")):
            fixed = _output(model, ids.to("spyre"))
    snap = rec.snapshot.to_json()
    assert snap["miscompiles"]["rotate-half"]["modules"] == [
        "model.layers.0.self_attn",
        "model.layers.1.self_attn",
    ]
    assert snap["fallbacks"]["aten.arange.start_out"] == 1
    assert snap["errors"] == {}
    assert not torch.equal(miscompiled, fixed)  # the miscompile changes the logits
    assert _cosine(fixed, reference) >= 0.999


def test_stick_friendly_llama_runs_with_layout_checks(spyre: ModuleType, tmp_path: Path) -> None:
    cpu = _llama(hidden=256, heads=2, layers=1)  # head_dim 128: halves of one stick
    ids = _ids(batch=1, seq=8)
    reference = _output(cpu, ids)
    model = _on_device(cpu)
    assert spyre.settings.layout_checks
    with spyre.use_stack(_fixed(tmp_path, "rotate-half")):
        out = _output(model, ids.to("spyre"))
    assert _cosine(out, reference) >= 0.999


def test_generate_greedy_matches_cpu(spyre: ModuleType, tmp_path: Path) -> None:
    cpu = _llama()
    ids = _ids(batch=1, seq=8)
    with torch.no_grad():
        expected = cpu.generate(ids, max_new_tokens=4, do_sample=False)
    model = _on_device(cpu)
    with (
        spyre.use_stack(_fixed(tmp_path, "rotate-half")),
        spyre.configure(layout_checks=False),
        spyre.telemetry.record() as rec,
        torch.no_grad(),
    ):
        got = model.generate(ids.to("spyre"), max_new_tokens=4, do_sample=False)
    assert got.cpu().tolist() == expected.tolist()
    assert rec.snapshot.to_json()["fallbacks"]  # bookkeeping ops of generate() ran on the host


def _attempt(spyre: ModuleType, name: str, model: Any, ids: torch.Tensor) -> tuple[Any, Any]:
    """Run at release ``name``: (output or the lowering error, telemetry of the run)."""
    result: Any
    with (
        spyre.use_stack(name),
        spyre.configure(layout_checks=False),
        spyre.telemetry.record() as rec,
    ):
        try:
            result = _output(model, ids.to("spyre"))
        except spyre.SpyreLoweringError as err:
            result = err
    return result, rec.snapshot.to_json()


@pytest.mark.parametrize("build", [_gpt2, _bert], ids=["gpt2", "bert"])
def test_across_releases(spyre: ModuleType, build: Callable[[], Any]) -> None:
    """At every release the model either fails with a teaching error naming its gap, or runs;
    a run matches the CPU unless telemetry recorded a miscompile. The oldest release fails;
    the newest matches."""
    cpu = build()
    ids = _ids()
    reference = _output(cpu, ids)
    model = _on_device(cpu)
    outcomes: dict[str, str] = {}
    names = spyre.builtin_catalogue().names
    for name in names:
        result, snap = _attempt(spyre, name, model, ids)
        if isinstance(result, spyre.SpyreLoweringError):
            assert result.release == name
            assert result.gap
            outcomes[name] = f"error:{result.gap}"
        elif _cosine(result, reference) >= 0.999:
            outcomes[name] = "match"
        else:
            assert snap["miscompiles"], f"{name}: logits differ with no miscompile"
            outcomes[name] = "miscompiled:" + ",".join(snap["miscompiles"])
    assert outcomes[names[0]].startswith("error:")
    assert outcomes[names[-1]] == "match", outcomes


class _Outside(torch.nn.Module):
    """A module instance that is no model's submodule, called from inside a forward (what the
    ``kernels`` library makes of Transformers 5.25's ``apply_rotary_pos_emb``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from spyre_sim._modules import current_module_path

        _SEEN.append(current_module_path())
        return x


_OUTSIDE = _Outside()
_SEEN: list[str | None] = []


class _Inner(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = _OUTSIDE(x)
        return out


def test_a_module_outside_the_model_counts_as_the_submodule_that_called_it() -> None:
    from spyre_sim import _modules

    _modules.install()
    model = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Sequential(_Inner()))
    _SEEN.clear()
    model(torch.zeros(1))
    _OUTSIDE(torch.zeros(1))  # on its own it is the outermost module
    assert _SEEN == ["1.0", "_Outside"]
