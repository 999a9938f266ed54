"""Every model type of a kind of the installed Transformers at sizes no tester uses, on the device.

Builds each model type of a kind's auto mapping from its config at odd sizes (hidden 40, five
heads of 8, one key/value head, intermediate 72, two layers; stock initialisation, vocabulary
256), runs one forward on the CPU, prepares it with the resolved adapters at ``--stack``, runs
the same forward on the emulated device and compares the logits. Each type runs in a process
of its own, killed after ``--timeout`` seconds.

Kinds (``--kind``, repeatable or a comma list; default ``causal-lm``), the inputs the forward
gets and the sizes each sets beyond the common ones:

- ``causal-lm`` (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``): token ids. Every size is passed to
  the config as given, as this probe always has (a composite's constructor may route them to
  its text config: Fuyu's does); a config that does not build or run so (a composite that
  keeps its text and vision configs at full size: Gemma 3, Llama 4, Qwen3.5) is tried again
  with the sizes set where it or a sub-config has them, as the other kinds set them (the
  result says ``fitted``).
- ``masked-lm`` (``MODEL_FOR_MASKED_LM_MAPPING_NAMES``): token ids.
- ``seq2seq-lm`` (``MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES``): token ids and decoder token
  ids of another length.
- ``image-classification`` (``MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES``): pixels of the
  config's channels, 36 x 36 in patches of 4 (40 x 40 when 36 does not build or run); the
  stages of hierarchical models 40, 80, 120, ... wide (Swin-like ones, whose width doubles by
  stage, from an embedding of 40) with heads of 8 and two blocks each, attention windows of 2
  (the last stage of a 36-pixel Swin is 2 x 2).
- ``audio-classification`` (``MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES``): the model's
  main input (``input_values`` or ``input_features``) as 5000 samples of raw audio (15 frames
  of 320) or 30 frames of its feature bins, in the first layout the CPU forward accepts;
  feature encoders 40 wide, positional convolutions in groups of 8 channels.

The kinds but ``causal-lm`` also set the encoder and decoder sizes (``d_model``,
``encoder_layers``, ``d_kv``, ...), embeddings as wide as the hidden size (SqueezeBERT needs
it; images: a stem of 24) and 37 labels for the classifiers. They set a key only where the
config (or a sub-config: text, vision, audio, encoder, decoder) has it, in its form (both sides
of an image, say); a config that refuses one key/value head is built with one per query head
(the result's ``attempt`` says which of the kind's sizes in the JSON ran). A composite config
that does not build is a ``cpu-error``.

A classifier's logits are pooled, so an error confined to a few positions could stay above
the cosine bar: for the classification kinds the probe also compares the last hidden state
position by position (``hidden``: the lowest cosine between the device's vector and the CPU's
at any position, :func:`worst_position`), and a position below 0.99 makes the type a
``mismatch``.

``--generate`` (causal LMs) also decodes 10 greedy tokens of a batch of two on both sides: the
prompt, and the prompt with its first three tokens as left padding (cache, masks and position
ids as a served batch has them). The tokens must agree up to the first step where the CPU's
two best scores are a tie (:func:`spyre_adapters.agreement.decoding`); the line shows each
row (``same 10 tokens``, ``differs at step 4 (a tie)``), and a row that differs elsewhere
makes the type a ``mismatch`` (or ``precision``, below).

Outcomes per type: ``match`` (the logits agree by :func:`spyre_adapters.agreement.compare`:
cosine at least 0.99 and the CPU's greedy token at every position the CPU decides),
``mismatch`` (it ran, the numbers differ: a silent wrong answer unless the run counted a
miscompile or an emulator limit, which the line then names), ``precision`` (it would be a
mismatch, but the device decided selections inside the model, a router's top-k, between
values within one DL16 step (``rounding_ties``: op and rows), and run again with the CPU's
choice at those rows (``replay``, :mod:`spyre_sim.selections`) the forward and the decoding
agree with the CPU's: rounding chose other experts, and that was the whole difference),
``raise`` (the device or an adapter raised: the error's
gap when it has one), ``cpu-error`` (the config does not build or run on the CPU at these
sizes, or needs more than ``--memory`` GiB, or its logits cannot judge an fp16 run: every one
below fp16's smallest normal, as the activations of deep random CNNs such as MobileNet vanish),
``timeout``, ``crash`` (the worker died).

    python benchmarks/probe_odd_sizes.py --stack 2026.09 --json probe.json
    python benchmarks/probe_odd_sizes.py --types llama,beam,ergo
    python benchmarks/probe_odd_sizes.py --generate --types llama,qwen2,mamba
    python benchmarks/probe_odd_sizes.py --kind masked-lm,image-classification --types bert,vit
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

# the script's own folder is on sys.path, in the probe and in each worker it starts
from probe_models import KINDS, MEMORY_GIB, SIZES, Kind, cap_memory, cpu_run

if TYPE_CHECKING:
    from torch import Tensor

#: New tokens of the greedy decoding ``--generate`` compares.
DECODE_STEPS = 10


class CpuDecode(NamedTuple):
    """A greedy decoding on the CPU: the batch it started from (the prompt, and the prompt
    with its first three tokens as left padding), the scores of each step, the new tokens and
    the top-k choices it made (:func:`spyre_sim.selections.recording`)."""

    feed: dict[str, Tensor]
    scores: tuple[Tensor, ...]
    tokens: Tensor
    choices: list[Any]


def _decode_feed(inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
    import torch

    ids = inputs["input_ids"]
    padded = ids.clone()
    padded[:, :3] = SIZES["pad_token_id"]
    mask = torch.ones_like(ids)
    return {
        "input_ids": torch.cat([ids, padded]),
        "attention_mask": torch.cat([mask, (torch.arange(ids.shape[1]) >= 3).long()[None]]),
    }


def _generate(model: Any, feed: Mapping[str, Tensor], **extra: Any) -> Any:
    import torch

    with torch.no_grad():
        return model.generate(
            **feed,
            max_new_tokens=DECODE_STEPS,
            min_new_tokens=DECODE_STEPS,
            do_sample=False,
            pad_token_id=SIZES["pad_token_id"],
            **extra,
        )


def _cpu_decode(model: Any, inputs: Mapping[str, Tensor]) -> CpuDecode:
    from spyre_sim.selections import recording

    feed = _decode_feed(inputs)
    with recording() as choices:
        out = _generate(model, feed, output_scores=True, return_dict_in_generate=True)
    prompt = feed["input_ids"].shape[1]
    return CpuDecode(feed, tuple(out.scores), out.sequences[:, prompt:], choices)


def _device_decode(model: Any, decode: CpuDecode) -> Tensor:
    """The new tokens of the same greedy decoding on the device (the model is there)."""
    on_device = {name: value.to("spyre") for name, value in decode.feed.items()}
    prompt = decode.feed["input_ids"].shape[1]
    tokens: Tensor = _generate(model, on_device).cpu()[:, prompt:]
    return tokens


def _replayed(
    model: Any,
    stack: str,
    feed: Mapping[str, Tensor],
    expected: Tensor,
    choices: list[Any],
    decode: CpuDecode | None,
    cpu_hidden: Tensor | None,
) -> dict[str, Any]:
    """The device's forward (and decoding) again, with the CPU's top-k choices at the rows
    rounding tied (:func:`spyre_sim.selections.replaying`): whether that alone makes them
    agree with the CPU, by every check the run failed (a classifier's hidden state per
    position too)."""
    import torch

    import spyre_sim
    from spyre_adapters.agreement import MIN_COSINE, compare, decoding
    from spyre_sim.selections import replaying

    with spyre_sim.use_stack(stack), torch.no_grad():
        hidden = {} if cpu_hidden is None else {"output_hidden_states": True}
        with replaying(choices) as forward_replay:
            out = model(**feed, **hidden)
        forward = compare(expected, out.logits.cpu().float(), logits=True)
        found: dict[str, Any] = {
            "rows": forward_replay.replaced,
            "aligned": forward_replay.aligned,
            "cosine": round(forward.cosine, 6),
            "matches": forward.matches and forward_replay.aligned,
        }
        if cpu_hidden is not None:
            worst = worst_position(cpu_hidden, out.hidden_states[-1].cpu().float())
            found["hidden"] = round(worst, 6)
            found["matches"] = found["matches"] and worst >= MIN_COSINE
        if decode is not None:
            with replaying(decode.choices) as decode_replay:
                tokens = _device_decode(model, decode)
            rows = decoding(decode.scores, decode.tokens, tokens)
            found["rows"] += decode_replay.replaced
            found["aligned"] = found["aligned"] and decode_replay.aligned
            found["decode"] = [row.describe() for row in rows]
            found["matches"] = (
                found["matches"] and decode_replay.aligned and all(r.matches for r in rows)
            )
    return found


def _last_hidden(model: Any, inputs: Mapping[str, Tensor]) -> Tensor | None:
    """The last hidden state of a forward with ``output_hidden_states`` (float32), or ``None``
    when the model gives none."""
    try:
        out = model(**inputs, output_hidden_states=True)
        return out.hidden_states[-1].float()  # type: ignore[no-any-return]
    except Exception:  # a model without hidden states: the logits alone are compared
        return None


def worst_position(expected: Tensor, got: Tensor) -> float:
    """The lowest cosine, over the positions of a hidden state (``[batch, tokens, hidden]``, or
    a CNN's ``[batch, channels, height, width]`` read per pixel), between the device's vector
    and the CPU's. A position whose CPU vector is below 1e-3 of the largest one's norm is not
    judged (its direction is rounding noise). NaN when the shapes differ or nothing is
    judged."""
    import torch

    if expected.shape != got.shape or expected.dim() < 2:
        return float("nan")
    cpu, device = expected.double(), got.double()
    if cpu.dim() == 4:
        cpu, device = cpu.movedim(1, -1), device.movedim(1, -1)
    cpu, device = cpu.reshape(-1, cpu.shape[-1]), device.reshape(-1, device.shape[-1])
    norms = cpu.norm(dim=-1)
    keep = norms > 1e-3 * norms.max()
    if not bool(keep.any()):
        return float("nan")
    cosine = torch.nn.functional.cosine_similarity(cpu[keep], device[keep], dim=-1)
    return float(cosine.min())


def _one(kind: Kind, model_type: str, stack: str, generate: bool = False) -> dict[str, Any]:
    """The probe of one type of ``kind``, in this process; with ``generate`` (causal LMs), also
    a greedy decoding of a batch with a left-padded row, judged by
    :func:`spyre_adapters.agreement.decoding`."""
    import warnings

    warnings.simplefilter("ignore")
    import torch

    import spyre_adapters
    import spyre_sim
    from spyre_adapters.agreement import MIN_COSINE, compare, decoding
    from spyre_adapters.enablement.families import judge_reference
    from spyre_sim import telemetry

    result: dict[str, Any] = {"type": model_type, "kind": kind.name, "stack": stack}
    try:
        model, inputs, expected, attempt, fitted, choices = cpu_run(kind, model_type)
    except Exception as error:  # any failure of the stock model is its outcome
        return {
            **result,
            "outcome": "cpu-error",
            "detail": f"{type(error).__name__}: {error}"[:300],
        }
    result["attempt"] = attempt
    if fitted:
        result["fitted"] = True
    result["inputs"] = {name: list(value.shape) for name, value in inputs.items()}
    unjudgeable = judge_reference(expected, "logits")
    if unjudgeable is not None:  # a reference no fp16 run can match: nothing to compare
        return {**result, "outcome": "cpu-error", "detail": unjudgeable}
    # a classifier's last hidden state, compared per position (its logits are pooled)
    per_position = kind.name.endswith("classification")
    with torch.no_grad():
        cpu_hidden = _last_hidden(model, inputs) if per_position else None
    decode = None
    if generate:
        try:
            decode = _cpu_decode(model, inputs)
        except Exception as error:  # a model that cannot generate on the CPU: forward only
            result["decode"] = [f"not on the CPU: {type(error).__name__}: {error}"[:200]]
    try:
        with spyre_sim.use_stack(stack):
            spyre_adapters.prepare(model, stack)
            result["adapters"] = sorted(
                f"{a.name} {a.version}" for a in spyre_adapters.applied(model)
            )
            model = model.to("spyre")
            telemetry.reset()
            with torch.no_grad():
                feed = {name: value.to("spyre") for name, value in inputs.items()}
                if cpu_hidden is not None:
                    out = model(**feed, output_hidden_states=True)
                    hidden = out.hidden_states[-1].cpu().float()
                else:
                    out = model(**feed)
                got = out.logits.cpu().float()
            if decode is not None:
                tokens = _device_decode(model, decode)
            snapshot = telemetry.snapshot()
    except Exception as error:  # the device's or an adapter's error is the outcome
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        return {**result, "outcome": "raise", "gap": getattr(error, "gap", None), "detail": detail}
    forward = compare(expected, got, logits=True)
    result["cosine"] = round(forward.cosine, 6)
    result["top1"] = None if forward.top1 is None else round(forward.top1, 4)
    result["miscompiles"] = sorted(snapshot.miscompiles)
    result["emulator_limits"] = sorted(snapshot.emulator_limits)
    # selections inside the model's modules (a router's top-k) decided within one DL16 step
    ties = {
        op: entry.in_modules for op, entry in snapshot.rounding_ties.items() if entry.in_modules
    }
    if ties:
        result["rounding_ties"] = ties
    result["outcome"] = "match" if forward.matches else "mismatch"
    if cpu_hidden is not None:
        worst = worst_position(cpu_hidden, hidden)
        result["hidden"] = round(worst, 6)
        if not worst >= MIN_COSINE:  # a position the pooled logits may hide
            result["outcome"] = "mismatch"
    if decode is not None:
        rows = decoding(decode.scores, decode.tokens, tokens)
        result["decode"] = [row.describe() for row in rows]
        if not all(row.matches for row in rows):
            result["outcome"] = "mismatch"
    if result["outcome"] == "mismatch" and ties:
        # a selection rounding decided inside the model: is it the whole difference?
        try:
            replay = _replayed(model, stack, feed, expected, choices, decode, cpu_hidden)
        except Exception as error:  # the replay's own failure leaves the mismatch standing
            replay = {"matches": False, "error": f"{type(error).__name__}: {error}"[:200]}
        result["replay"] = replay
        if replay["matches"]:
            result["outcome"] = "precision"
    return result


def _types(kind: Kind) -> list[str]:
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, kind.mapping))


def _kind_names(values: list[str] | None) -> list[str]:
    """The ``--kind`` values (repeated or comma lists), in order, each once."""
    names = [name for value in values or ["causal-lm"] for name in value.split(",") if name]
    return list(dict.fromkeys(names))


def _worker(args: argparse.Namespace, kind: Kind, model_type: str) -> dict[str, Any]:
    """The result of probing one type in a process of its own."""
    cmd = [sys.executable, __file__, "--one", model_type, "--kind", kind.name]
    cmd += ["--stack", args.stack, "--memory", str(args.memory)]
    cmd += ["--generate"] if args.generate else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"type": model_type, "kind": kind.name, "outcome": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return {"type": model_type, "kind": kind.name, "outcome": "crash", "detail": tail[0][:300]}


def _summary(results: list[dict[str, Any]], kinds: list[Kind], stack: str) -> list[str]:
    """One line per kind: its types and their count per outcome."""
    lines = []
    for kind in kinds:
        counts = Counter(r["outcome"] for r in results if r["kind"] == kind.name)
        total = sum(counts.values())
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        lines.append(f"{kind.name:22s} {total} types at {stack}: {shown}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="2026.09")
    parser.add_argument(
        "--kind",
        action="append",
        help=f"kinds of model, repeatable or comma-separated: {', '.join(KINDS)} "
        "(default: causal-lm)",
    )
    parser.add_argument("--types", help="comma-separated model types (default: every one)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per type")
    parser.add_argument("--memory", type=float, default=MEMORY_GIB, help="GiB of data per type")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument(
        "--generate",
        action="store_true",
        help=f"causal LMs: also compare {DECODE_STEPS} greedy tokens of a batch with a "
        "left-padded row (tokens must agree up to a tie)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a worker's own type
    args = parser.parse_args()
    names = _kind_names(args.kind)
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s) {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    kinds = [KINDS[name] for name in names]
    if args.one:
        cap_memory(args.memory)
        generate = args.generate and kinds[0].name == "causal-lm"
        print(json.dumps(_one(kinds[0], args.one, args.stack, generate)))
        return 0
    named = args.types.split(",") if args.types else None
    mapped = {kind.name: _types(kind) for kind in kinds}
    runs = [(k, t) for k in kinds for t in named or mapped[k.name] if t in mapped[k.name]]
    unmapped = sorted(set(named or ()) - {t for _, t in runs})
    if unmapped:
        print(f"not a type of {', '.join(names)}: {', '.join(unmapped)}", file=sys.stderr)
    results = []
    start = time.perf_counter()
    for kind, model_type in runs:
        result = _worker(args, kind, model_type)
        results.append(result)
        keys = ("cosine", "decode", "gap", "miscompiles", "emulator_limits", "rounding_ties")
        keys += ("replay", "hidden")
        shown = {k: result[k] for k in keys if result.get(k) not in (None, [])}
        print(f"{model_type:28s} {kind.name:22s} {result['outcome']:9s} {shown or ''}", flush=True)
    print()
    print("\n".join(_summary(results, kinds, args.stack)))
    print(f"{len(results)} types in {time.perf_counter() - start:.0f} s")
    if args.json:
        sizes = {kind.name: list(kind.attempts) for kind in kinds}
        document = {"stack": args.stack, "sizes": sizes, "results": results}
        args.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
