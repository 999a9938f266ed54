"""Collect the ATen op overloads that Transformers' own model tests reach inside the model scope.

For every ``tests/models/*/test_modeling_*.py`` of a Transformers test tree, each test class with
``all_model_classes`` is set up as its suite would (``setUp()`` builds the tiny tester config),
and for every model class a model is built from that config with random weights, on the CPU,
in eval mode, and run under a ``TorchDispatchMode`` that records every op overload:

- one forward with the suite's common inputs;
- one forward with labels (``_prepare_for_class(..., return_labels=True)``), so the loss is
  computed inside the forward as the suites' loss tests do (no backward);
- the same forward in float16 (``model.half()``), as the device computes: some models take
  fp16-only branches (T5's overflow clamp with ``isinf``);
- for generative classes, a greedy ``generate`` of 3 new tokens from the suite's generation
  inputs (logits processors, stopping criteria and cache updates run inside it).

Only the model call itself is recorded (building inputs is the harness, not the model scope).
Nothing is downloaded: models come from configs, inputs from the testers. The result is a JSON
file with, per op overload, the number of test files whose models reach it, and the list of
files processed and of those that failed to build or run::

    HF_HUB_OFFLINE=1 python benchmarks/collect_model_ops.py \\
        --tree PATH/TO/transformers-tests/tree --out tests/data/model-ops.json

The tree must be importable as packages (``tests/__init__.py`` present, as in Transformers'
repository); it is only read.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import signal
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any


def _recorder() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: set[str] = set()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            packet = func._overloadpacket.__name__
            self.ops.add(f"{func.namespace}.{packet}.{func._overloadname}")
            return func(*args, **(kwargs or {}))

    return Recorder()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def _run_file(module_name: str) -> tuple[set[str], list[str]]:
    import torch

    from spyre_adapters.enablement.testers import model_test_classes

    ops: set[str] = set()
    errors: list[str] = []
    module = importlib.import_module(module_name)
    for test_class in model_test_classes(module):
        try:
            case: Any = test_class(methodName="setUp")
            case.setUp()
            config, inputs = case.model_tester.prepare_config_and_inputs_for_common()
        except Exception as exc:  # a tester that cannot set up: recorded, not fatal
            errors.append(f"{test_class.__name__}: setUp: {type(exc).__name__}: {exc}"[:300])
            continue
        generative = set(getattr(case, "all_generative_model_classes", ()) or ())
        for model_class in case.all_model_classes or ():
            label = f"{test_class.__name__}/{model_class.__name__}"
            try:
                torch.manual_seed(0)
                model = model_class(config).eval()
            except Exception as exc:
                errors.append(f"{label}: build: {type(exc).__name__}: {exc}"[:300])
                continue
            # (what, prepare): prepare() runs outside the recorder (building inputs, converting
            # the model is harness work) and returns the model call to record
            runs: list[tuple[str, Callable[[], Callable[[], Any]]]] = [
                ("forward", partial(_plain_call, case, model, inputs, model_class, False)),
                ("forward+labels", partial(_plain_call, case, model, inputs, model_class, True)),
            ]
            if model_class in generative and hasattr(
                case, "prepare_config_and_inputs_for_generate"
            ):
                runs.append(("generate", partial(_generate, case, model_class)))
            runs.append(("forward fp16", partial(_half_call, case, model, inputs, model_class)))
            for what, prepare in runs:
                recorder = _recorder()
                try:
                    with torch.no_grad(), _quiet():
                        call = prepare()
                        with recorder:
                            call()
                except Exception as exc:
                    errors.append(f"{label}: {what}: {type(exc).__name__}: {exc}"[:300])
                ops |= recorder.ops
    return ops, errors


def _plain_call(
    case: Any, model: Any, inputs: Any, model_class: Any, labels: bool
) -> Callable[[], Any]:
    prepared = _prepared(case, inputs, model_class, labels)
    return lambda: model(**prepared)


def _prepared(case: Any, inputs: Any, model_class: Any, labels: bool = False) -> dict[str, Any]:
    """The inputs the suite passes to this class (backbone suites pass the common ones)."""
    prepare = getattr(case, "_prepare_for_class", None)
    if prepare is None:
        return dict(inputs)
    return dict(prepare(inputs, model_class, return_labels=labels))


def _half(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.half()
    return value


def _half_call(case: Any, model: Any, inputs: Any, model_class: Any) -> Callable[[], Any]:
    """The forward in float16, as the device computes: fp16-only branches (overflow clamps,
    ``isinf`` checks) are reached only there. Converts the model in place (run last)."""
    prepared = {k: _half(v) for k, v in _prepared(case, inputs, model_class).items()}
    half = model.half()
    return lambda: half(**prepared)


def _generate(case: Any, model_class: Any) -> Callable[[], Any]:
    import torch

    config, inputs = case.prepare_config_and_inputs_for_generate()
    torch.manual_seed(0)
    model = model_class(config).eval()
    return lambda: model.generate(**inputs, max_new_tokens=3, min_new_tokens=3, do_sample=False)


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="root of the test tree")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--only", action="append", help="model folder name (default: all)")
    parser.add_argument("--timeout", type=int, default=300, help="s per test file (default 300)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _on_alarm)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    root = args.tree.resolve()
    if not (root / "tests" / "models").is_dir():
        parser.error(f"--tree {root}: no tests/models folder there")
    from spyre_adapters.enablement.testers import prepared_tree

    # a tree without the library's sources (as Transformers' test tree is shipped apart)
    # is imported through links beside the installed Transformers as `src/transformers`
    sys.path.insert(0, str(prepared_tree(root)))

    import torch
    import transformers

    files = sorted((root / "tests" / "models").glob("*/test_modeling_*.py"))
    if args.only:
        files = [f for f in files if f.parent.name in args.only]
    counts: Counter[str] = Counter()
    processed: list[str] = []
    failures: dict[str, list[str]] = {}
    start = time.monotonic()
    for index, path in enumerate(files, 1):
        rel = path.relative_to(root).with_suffix("")
        name = ".".join(rel.parts)
        t0 = time.monotonic()
        signal.alarm(args.timeout)
        try:
            ops, errors = _run_file(name)
        except _Timeout:
            ops, errors = set(), [f"timeout: more than {args.timeout} s"]
        except Exception as exc:  # import errors: optional dependencies missing
            ops, errors = set(), [f"import: {type(exc).__name__}: {exc}"[:300]]
            traceback.print_exc(limit=1, file=sys.stderr)
        finally:
            signal.alarm(0)
        counts.update(ops)
        processed.append(str(rel.with_suffix(".py")))
        if errors:
            failures[str(rel.with_suffix(".py"))] = errors
        print(
            f"[{index}/{len(files)}] {rel.parent.name}: {len(ops)} ops, {len(errors)} errors, "
            f"{time.monotonic() - t0:.1f}s",
            file=sys.stderr,
            flush=True,
        )
    document = {
        "about": (
            "ATen op overloads reached inside the model scope (model forward, forward with "
            "labels, greedy generate of 3 tokens) by the models that Transformers' own tests "
            "build from their testers' tiny configs (random weights, CPU, eval mode, no_grad). "
            "Produced by benchmarks/collect_model_ops.py; it says nothing about what Spyre "
            "supports."
        ),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "files": len(processed),
        "wall_seconds": round(time.monotonic() - start),
        "op_overload_count": dict(sorted(counts.items())),
        "failures": failures,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(
        f"wrote {args.out}: {len(counts)} op overloads from {len(processed)} files", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
