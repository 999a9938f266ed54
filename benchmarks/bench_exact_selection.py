"""What keeping infinities and NaN in the stick-layout selections costs a forward on the device.

Run: ``python benchmarks/bench_exact_selection.py [--repeats N] [--stack R]``. Builds
Transformers' tester-sized Llama (hidden 32, four heads of 8, one KV head), BERT and ViT from
their configs (random weights, no downloads): at a release that refuses offset slices of the
stick dim (2026.05) every head split of theirs is a placement matmul; at 2026.09 it is a stack of
slices and no selection runs (families that cut halves of a stick dim narrower than two sticks,
such as CLAP's, still select there: see docs/MEASUREMENTS.md). It prepares each
twice on the emulated device -- once with the first generation of the stick-layout adapters
(``head-padding`` 2.7.0, ``stick-align-padding`` 2.3.0, ``fused-projection-split`` 2.1.0), once
with the newest versions, whose selections carry non-finite elements -- and times one forward of
each, alternating, with DL16 numerics on. Prints, per model, the median ms of both, the median of
the per-pair ratios, the ATen ops one forward issues with each, and whether the two gave the
same logits bit for bit (they must: the inputs are finite).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from packaging.version import Version

#: the newest versions before the exact selections
FIRST_GENERATION = {
    "head-padding": Version("2.7.0"),
    "stick-align-padding": Version("2.3.0"),
    "fused-projection-split": Version("2.1.0"),
}


def _first_generation() -> Any:
    from spyre_adapters.preparation import default_registry

    return default_registry().where(
        lambda m: m.name not in FIRST_GENERATION or m.version <= FIRST_GENERATION[m.name],
        source="benchmark",
    )


def _models() -> dict[str, tuple[Callable[[], Any], dict[str, torch.Tensor]]]:
    from transformers import (
        BertConfig,
        BertModel,
        LlamaConfig,
        LlamaForCausalLM,
        ViTConfig,
        ViTModel,
    )

    ids = torch.randint(0, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    llama = LlamaConfig(vocab_size=99, hidden_size=32, intermediate_size=37,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1)  # fmt: skip
    bert = BertConfig(vocab_size=99, hidden_size=32, intermediate_size=37,
                      num_hidden_layers=2, num_attention_heads=4)  # fmt: skip
    vit = ViTConfig(image_size=30, patch_size=2, hidden_size=32, intermediate_size=37,
                    num_hidden_layers=2, num_attention_heads=4)  # fmt: skip
    return {
        "llama (tester size)": (lambda: LlamaForCausalLM(llama), {"input_ids": ids}),
        "bert (tester size)": (lambda: BertModel(bert), {"input_ids": ids}),
        "vit (tester size)": (lambda: ViTModel(vit), {"pixel_values": pixels}),
    }


def _case(build: Callable[[], Any], inputs: dict[str, torch.Tensor], stack: str,
          repeats: int) -> tuple[float, float, float, int, int, bool]:  # fmt: skip
    import spyre_adapters
    from spyre_adapters.main_output import main_output
    from spyre_sim import telemetry

    models = []
    for registry in (_first_generation(), None):
        torch.manual_seed(0)
        model = build().eval()
        spyre_adapters.prepare(model, stack, registry=registry)
        models.append(model.to("spyre"))
    on_device = {k: v.to("spyre") for k, v in inputs.items()}

    def forward(model: Any) -> tuple[torch.Tensor, int]:
        telemetry.reset()
        with torch.inference_mode():
            out = main_output(model(**on_device))
        assert out is not None  # logits or hidden states: every model here returns one
        ops = sum(sum(v.values()) for v in telemetry.snapshot().ops.values())
        return out.cpu(), ops

    (first_out, first_ops), (exact_out, exact_ops) = forward(models[0]), forward(models[1])
    times: tuple[list[float], list[float]] = ([], [])
    ratios = []
    for _ in range(repeats):
        pair = []
        for i, model in enumerate(models):
            start = time.perf_counter()
            forward(model)
            pair.append(time.perf_counter() - start)
            times[i].append(pair[-1] * 1e3)
        ratios.append(pair[1] / pair[0])
    return (statistics.median(times[0]), statistics.median(times[1]), statistics.median(ratios),
            first_ops, exact_ops, torch.equal(first_out, exact_out))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # the device's once-per-process notices
    import spyre_sim

    print(f"stack {args.stack}, DL16 numerics, {args.repeats} alternating pairs")
    print(f"{'model':22} {'first ms':>9} {'exact ms':>9} {'ratio':>7} {'ops':>11} same")
    with spyre_sim.use_stack(args.stack):
        for name, (build, inputs) in _models().items():
            first, exact, ratio, first_ops, exact_ops, same = _case(
                build, inputs, args.stack, args.repeats
            )
            ops = f"{first_ops}->{exact_ops}"
            print(f"{name:22} {first:9.2f} {exact:9.2f} {ratio:6.2f}x {ops:>11} {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
