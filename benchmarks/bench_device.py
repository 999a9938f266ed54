"""Time a tiny and a medium Llama forward on plain CPU and on the emulated spyre device.

Run: ``python benchmarks/bench_device.py [--repeats N]``. Both models use random weights built
from ``LlamaConfig`` (no downloads) and run in fp16 under ``torch.inference_mode()`` with
numerics emulation on; layout checks are off (the tiny config's head_dim is below a stick)
and the stack is the newest built-in release. Prints the median times and the median
device/CPU ratio of alternating runs for each model (targets: tiny <= 4x, medium <= 1.5x), and, as the
floor any Python tensor subclass pays, the ratio of a do-nothing wrapper subclass (unwrap,
run the op on the held tensor, wrap) on the same model. One intra-op thread by default:
with OpenMP threads on a busy machine, tiny kernels wait for each other far longer than they
run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch


def _paired_ms(
    cpu: Callable[[], object], dev: Callable[[], object], repeats: int
) -> tuple[float, float, float]:
    """Median CPU ms, median device ms, and the median of per-pair ratios. CPU and device runs
    alternate, so both see the same machine load."""
    for _ in range(3):
        cpu()
        dev()
    t_cpu, t_dev, ratios = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        cpu()
        middle = time.perf_counter()
        dev()
        end = time.perf_counter()
        t_cpu.append((middle - start) * 1e3)
        t_dev.append((end - middle) * 1e3)
        ratios.append((end - middle) / (middle - start))
    return statistics.median(t_cpu), statistics.median(t_dev), statistics.median(ratios)


class _Passthrough(torch.Tensor):
    """A do-nothing wrapper subclass: PyTorch's own cost of a Python tensor subclass."""

    _inner: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> _Passthrough:
        made: _Passthrough = torch.Tensor._make_wrapper_subclass(
            cls,
            inner.shape,
            strides=inner.stride(),
            storage_offset=inner.storage_offset(),
            dtype=inner.dtype,
            device=inner.device,
            requires_grad=False,
        )
        made._inner = inner
        return made

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["_inner"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], meta: Any, size: Any, stride: Any
    ) -> _Passthrough:
        return _Passthrough(inner["_inner"])

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        def unwrap(x: Any) -> Any:
            if type(x) is _Passthrough:
                return x._inner
            if isinstance(x, (list, tuple)):
                return type(x)(unwrap(y) for y in x)
            return x

        out = func(*unwrap(tuple(args)), **{k: unwrap(v) for k, v in (kwargs or {}).items()})
        # under inference_mode a view of a normal tensor must be a normal tensor (autograd's
        # view kernel gives it the base's version counter), as spyre_sim's views are
        base = next((a for a in args if type(a) is _Passthrough), None)
        normal = getattr(func, "is_view", False) and base is not None and not base.is_inference()
        with torch.inference_mode(False) if normal else contextlib.nullcontext():
            if isinstance(out, torch.Tensor):
                return _Passthrough(out)
            if isinstance(out, (list, tuple)):
                return type(out)(_Passthrough(o) if isinstance(o, torch.Tensor) else o for o in out)
        return out


def _case(
    name: str, hidden: int, layers: int, heads: int, seq: int, batch: int, repeats: int
) -> tuple[str, float, float, float, float]:
    from transformers import LlamaConfig, LlamaForCausalLM

    import spyre_sim

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        vocab_size=1024,
        max_position_embeddings=max(seq, 64),
    )
    config._attn_implementation = "sdpa"
    cpu: Any = LlamaForCausalLM(config)
    dev: Any = LlamaForCausalLM(config)
    floor: Any = LlamaForCausalLM(config)
    for model in (cpu, dev, floor):
        model.eval().half()
    dev.load_state_dict(cpu.state_dict())
    floor.load_state_dict(cpu.state_dict())
    dev.to("spyre")
    floor._apply(_Passthrough)
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    ids_dev = ids.to("spyre")
    ids_floor = _Passthrough(ids)

    def run(model: Any, inputs: torch.Tensor) -> Callable[[], object]:
        def forward() -> object:
            with torch.inference_mode():
                return model(inputs).logits

        return forward

    with spyre_sim.configure(numerics=True, layout_checks=False):
        t_cpu, t_dev, ratio = _paired_ms(run(cpu, ids), run(dev, ids_dev), repeats)
    _, _, floor_ratio = _paired_ms(run(cpu, ids), run(floor, ids_floor), repeats)
    return name, t_cpu, t_dev, ratio, floor_ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads for both runs (default 1: stable timings on a shared machine)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # fallback / downcast warnings are expected here
    cases = [
        _case("tiny (b2 s32 h64 l2)", 64, 2, 4, 32, 2, args.repeats),
        _case("medium (b2 s128 h512 l4)", 512, 4, 8, 128, 2, max(5, args.repeats // 4)),
    ]
    print(f"{'model':28} {'cpu ms':>9} {'spyre ms':>9} {'ratio':>7} {'floor':>7}")
    for name, t_cpu, t_dev, ratio, floor_ratio in cases:
        print(f"{name:28} {t_cpu:9.2f} {t_dev:9.2f} {ratio:6.2f}x {floor_ratio:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
