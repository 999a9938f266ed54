"""Every causal-LM type of the installed Transformers at sizes no tester uses, on the device.

Builds each model type of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` from its config at odd sizes
(hidden 40, five heads of 8, one key/value head, intermediate 72, two layers; stock
initialisation, vocabulary 256), runs one forward on the CPU, prepares it with the resolved
adapters at ``--stack``, runs the same forward on the emulated device and compares the
logits. Each type runs in a process of its own, killed after ``--timeout`` seconds.

Outcomes per type: ``match`` (cosine of the logits above 0.99), ``mismatch`` (it ran, the
numbers differ: a silent wrong answer unless the run counted a miscompile or an emulator
limit, which the line then names), ``raise`` (the device or an adapter raised: the error's
gap when it has one), ``cpu-error`` (the config does not build or run on the CPU at these
sizes), ``timeout``.

    python benchmarks/probe_odd_sizes.py --stack 2026.09 --json probe.json
    python benchmarks/probe_odd_sizes.py --types llama,beam,ergo
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

SIZES: dict[str, Any] = {
    "hidden_size": 40,
    "intermediate_size": 72,
    "num_attention_heads": 5,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
}
PROMPT = [[5, 17, 42, 7, 99, 3, 64, 12, 201]]


def _one(model_type: str, stack: str) -> dict[str, Any]:
    """The probe of one type, in this process."""
    import warnings

    warnings.simplefilter("ignore")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    import spyre_adapters
    import spyre_sim
    from spyre_sim import telemetry

    result: dict[str, Any] = {"type": model_type, "stack": stack}
    ids = torch.tensor(PROMPT)
    try:
        config = AutoConfig.for_model(model_type, **SIZES)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).eval()
        with torch.no_grad():
            expected = model(input_ids=ids).logits.float()
    except Exception as error:  # any failure of the stock model is its outcome
        return {
            **result,
            "outcome": "cpu-error",
            "detail": f"{type(error).__name__}: {error}"[:300],
        }
    try:
        with spyre_sim.use_stack(stack):
            spyre_adapters.prepare(model, stack)
            result["adapters"] = sorted(
                f"{a.name} {a.version}" for a in spyre_adapters.applied(model)
            )
            model = model.to("spyre")
            telemetry.reset()
            with torch.no_grad():
                got = model(input_ids=ids.to("spyre")).logits.cpu().float()
            snapshot = telemetry.snapshot()
    except Exception as error:  # the device's or an adapter's error is the outcome
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        return {**result, "outcome": "raise", "gap": getattr(error, "gap", None), "detail": detail}
    cosine = torch.nn.functional.cosine_similarity(got.flatten(), expected.flatten(), dim=0)
    result["cosine"] = round(float(cosine), 6)
    result["top1"] = round(float((got.argmax(-1) == expected.argmax(-1)).float().mean()), 4)
    result["miscompiles"] = sorted(snapshot.miscompiles)
    result["emulator_limits"] = sorted(snapshot.emulator_limits)
    result["outcome"] = "match" if cosine > 0.99 else "mismatch"
    return result


def _types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument("--types", help="comma-separated model types (default: every one)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per type")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a worker's own type
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one, args.stack)))
        return 0
    types = args.types.split(",") if args.types else _types()
    results = []
    start = time.perf_counter()
    for model_type in types:
        cmd = [sys.executable, __file__, "--one", model_type, "--stack", args.stack]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if lines:
                result = json.loads(lines[-1])
            else:
                tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
                result = {"type": model_type, "outcome": "crash", "detail": tail[0][:300]}
        except subprocess.TimeoutExpired:
            result = {"type": model_type, "outcome": "timeout"}
        results.append(result)
        shown = {k: result[k] for k in ("cosine", "gap", "emulator_limits") if result.get(k)}
        print(f"{model_type:28s} {result['outcome']:9s} {shown or ''}", flush=True)
    counts = Counter(r["outcome"] for r in results)
    print(f"\n{len(results)} types at {args.stack} in {time.perf_counter() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"stack": args.stack, "sizes": SIZES, "results": results},
                                        indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
