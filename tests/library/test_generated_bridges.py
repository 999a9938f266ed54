"""Every generated built-in op bridge passes the bar of a hand-written adapter: the adapted
model computes what the stock model computes on the CPU, and on the device at a release in its
range the family it lists runs and matches the CPU with it, and is stopped without it. A bridge
generated from samples a test suite captured (``pytest --spyre-capture-bridges``: ops the
family's plain forward never reaches), or from the loops over families built from a test
tree's model testers (``generate_bridges.py --testers``: families that need not build from
their config alone), is proved on those samples instead, kept in
``tests/data/bridge-samples/``: the release refuses them, and its candidate matches the CPU."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from spyre_adapters import build_registry, builtin
from spyre_adapters.contract import ModelEdit
from spyre_adapters.enablement.device_runs import run_on_device
from spyre_adapters.enablement.families import BuiltFamily, build_family, unrun
from spyre_adapters.enablement.results import DeviceRun
from spyre_adapters.enablement.size_presets import FamilyBuildError
from spyre_adapters.lifecycle import Lifecycle, Status
from spyre_adapters.manifest import Manifest
from spyre_adapters.registry import Registry

REGISTRY = build_registry(entry_points=False, plugins=[builtin])
GENERATED = [m for m in REGISTRY.manifests() if m.generated]
#: The releases the generator ran the families at (`.ci/generate_bridges.py --stack ...`).
VERIFIED_AT = ("2026.05", "2026.09")
#: The samples a version generated from a suite's captures was validated on.
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "bridge-samples"


def samples_of(manifest: Manifest) -> Path:
    return SAMPLES / f"{manifest.name}-{manifest.version}.pt"


CAPTURED = [m for m in GENERATED if samples_of(m).is_file()]
#: The versions whose range holds such a release, with a verified family.
ON_DEVICE = [
    m
    for m in GENERATED
    if m.families and any(r in VERIFIED_AT for r in m.bridges[0].releases) and m not in CAPTURED
]


def test_generated_bridges_are_counted_apart_and_hand_written_ones_stay_few() -> None:
    hand_written = {m.name for m in REGISTRY.manifests() if not m.generated}
    # the sweep's target was at most 20; host-complex-rope (complex-form RoPE, a lasting gap
    # no other adapter's concept covers) is the 21st, delta-rule-rows (the gated delta rule's
    # triangular solve, four families) the 22nd, real-dft (FNet's Fourier mixing as real
    # matmuls, gap complex) the 23rd, unfolded-lstm (nn.LSTM run op by op where the padded
    # matmuls see it) the 24th, host-conv-padding (codec conv padding from 0-d buffers, whose
    # quotient DL16 cannot hold) the 25th, real-spectrum (Autoformer's auto-correlation FFT
    # as real matmuls, gap complex) the 26th, einsum-pieces (two-operand einsum as the steps
    # of ATen's contraction, so head-padding sees its final split; MaskFormer, XLNet) the
    # 27th, unfolded-gru-cell (nn.GRUCell op by op, as unfolded-lstm for nn.LSTM; SLANet) the
    # 28th, integer-pow (a refused power of an integer tensor as PyTorch computes it, a
    # handler beside the generated pow bridges; LightGlue, VideoLLaMA 3) the 29th,
    # take-along-gather (take_along_dim as the gather that takes the device's int32 index;
    # PP-DocLayoutV2) the 30th, rotate-half-matmul (rotate_half as x @ P where rope-rotation
    # declines: Gemma 4's attention, DiffusionGemma) the 31st, bridge-grid-sampler-2d 2.1.0 (the
    # host's grid sampler in float32: PyTorch's fp16 CPU kernel returns NaN for Mask2Former's
    # strided views; written before the generator learnt the host-float32 candidate and the
    # reversed-layout variant, with which it now finds the same) the 32nd, fp32-row-sums (fp32
    # last-dim reductions of more than 32 rows as products at 2026.07, whatever norm or
    # adapter computes them: Mamba's fp32 residual stream, every fp32 LayerNorm) the 33rd:
    # README, "Sweep"
    assert len(hand_written) <= 33
    for manifest in GENERATED:
        assert manifest.name.startswith("bridge-")
        assert manifest.bridges
        assert manifest.order == 300


def listed_families(manifest: Manifest) -> Iterator[BuiltFamily]:
    """The families the manifest lists that the installed Transformers builds, in order (the
    families were verified with another Transformers release than the tests may run with)."""
    from transformers import CONFIG_MAPPING

    for family in manifest.families:
        if family not in CONFIG_MAPPING:
            continue
        try:
            yield build_family(family)
        except FamilyBuildError:
            continue


def first_family(manifest: Manifest) -> BuiltFamily:
    """The first of :func:`listed_families`."""
    for built in listed_families(manifest):
        return built
    pytest.skip(f"no family {manifest.label} lists builds with the installed Transformers")


class OneOp(torch.nn.Module):
    """A model whose forward is one call of ``op`` on a kept sample's arguments."""

    def __init__(self, op: str, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        super().__init__()
        from spyre_adapters.library.op_bridge import resolve_op

        self.op, self.args, self.kwargs = resolve_op(op), args, kwargs

    def forward(self) -> object:
        return self.op(*self.args, **self.kwargs)


@pytest.mark.parametrize("manifest", GENERATED, ids=lambda m: m.label)
def test_same_output_as_the_stock_model_on_the_cpu(manifest: Manifest) -> None:
    """A family it lists, or (when none builds from its config alone: families built from
    their testers) a one-op model on each kept sample."""
    built = next(listed_families(manifest), None)
    if built is not None:
        model = copy.deepcopy(built.model)
        edit = ModelEdit(model)
        manifest.load().apply(model, edit)
        assert edit.touched
        # the same random stream for both (ViLT samples its image patches in the forward)
        torch.manual_seed(0)
        expected = built.run(unrun(built.model))
        torch.manual_seed(0)
        torch.testing.assert_close(built.run(model), expected)
        return
    if not samples_of(manifest).is_file():
        pytest.skip(f"no family {manifest.label} lists builds with the installed Transformers")
    from spyre_adapters.enablement.captured import read_sample_file

    op, samples = read_sample_file(samples_of(manifest))
    for sample in samples:
        stock = OneOp(op, sample.args, sample.kwargs)
        adapted = copy.deepcopy(stock)
        edit = ModelEdit(adapted)
        manifest.load().apply(adapted, edit)
        assert edit.touched
        torch.testing.assert_close(adapted(), stock(), msg=sample.label)


def _without(name: str) -> Registry:
    reduced = Registry(REGISTRY.catalogue)
    reduced.add_all((m for m in REGISTRY.manifests() if m.name != name), source="test")
    return reduced


def _only(manifest: Manifest) -> Registry:
    """The built-ins with no other version of ``manifest``'s adapter (a newer version that
    supersedes it at a release would otherwise be applied in its place)."""
    reduced = Registry(REGISTRY.catalogue)
    reduced.add_all(
        (m for m in REGISTRY.manifests() if m.name != manifest.name or m is manifest),
        source="test",
    )
    return reduced


@pytest.mark.parametrize("manifest", ON_DEVICE, ids=lambda m: m.label)
def test_its_family_runs_with_it_on_the_device_and_stops_without_it(manifest: Manifest) -> None:
    """At a release its evidence names (the generator ran 2026.05 and 2026.09) where the
    catalogue still refuses the op, a family it lists reaches the op, runs and matches the CPU
    with it, and stops at the op without it. Where the catalogue lowers the op now (a
    correction from newer evidence), the lifecycle retires it there, and the family runs
    without it: the retirement is proved as ``audit --verify`` proves it."""
    import spyre_sim

    (bridge,) = manifest.bridges
    tried = [r for r in reversed(bridge.releases) if r in VERIFIED_AT]
    assert tried, bridge.releases
    lifecycle = Lifecycle(_only(manifest))
    needed = [r for r in tried if manifest.open_gaps(spyre_sim.resolve_stack(r))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not needed:
            for release in tried:
                assert lifecycle.status_of(manifest, release).status is Status.RETIRED
            gone = run_on_device(
                first_family(manifest),
                tried[0],
                adapters=True,
                registry=_without(manifest.name),
                list_all_gaps=False,
            )
            assert gone.ok, (tried[0], gone.error, gone.comparison)
            return
        seen = []
        for built in listed_families(manifest):
            if not reaches(built, bridge.op):
                seen.append(f"{built.model_type}: its CPU forward does not call {bridge.op}")
                continue
            for release in needed:
                kept = run_on_device(
                    built, release, adapters=True, registry=_only(manifest), list_all_gaps=False
                )
                seen.append(f"{built.model_type} at {release}: {_outcome(kept)}")
                if kept.ok and kept.bridged.get(bridge.op):
                    break
            else:
                continue
            break
        else:
            if not any("does not call" not in line for line in seen):
                # verified with another Transformers release, whose models call the op
                pytest.skip(
                    f"with the installed Transformers no family {manifest.label} lists calls "
                    f"{bridge.op}: " + "; ".join(seen)
                )
            pytest.fail(
                f"no family {manifest.label} lists reaches {bridge.op} and matches the CPU with "
                "it: " + "; ".join(seen)
            )
        assert manifest.label in kept.working
        gone = run_on_device(
            built, release, adapters=True, registry=_without(manifest.name), list_all_gaps=False
        )
    assert not gone.ran
    assert gone.error is not None
    assert gone.error.op == bridge.op


def reaches(built: BuiltFamily, op: str) -> bool:
    """Whether the family's forward on the CPU calls ``op`` (an overload name), in fp32 or
    in fp16 as the device runs it (T5 checks ``isinf`` only in fp16)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from spyre_adapters.library.op_bridge import op_name

    called = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if op_name(func) == op:
                called.append(func)
            return func(*args, **(kwargs or {}))

    def as_built() -> torch.nn.Module:
        return built.model

    def in_half() -> torch.nn.Module:
        return copy.deepcopy(built.model).half()

    for make in (as_built, in_half):
        try:
            with Watch(), torch.no_grad():
                built.run(make())
        except Exception:  # an op the CPU has no fp16 kernel for: the device run will tell
            continue
        if called:
            return True
    return False


def _outcome(run: DeviceRun) -> str:
    if run.error is not None:
        return f"stopped at {run.error.op} ({run.error.gap})"
    if run.comparison is not None and not run.comparison.matches:
        return f"mismatch (cosine {run.comparison.cosine:.4f})"
    return "matched, the op not reached" if run.ok else "did not run"


@pytest.mark.parametrize("manifest", CAPTURED, ids=lambda m: m.label)
def test_a_bridge_from_captured_samples_is_needed_and_holds_on_them(manifest: Manifest) -> None:
    import spyre_sim
    from spyre_adapters.enablement.bridge import refuses
    from spyre_adapters.enablement.captured import read_sample_file
    from spyre_adapters.enablement.op_validation import validate
    from spyre_adapters.library.op_bridge import resolve_op

    (bridge,) = manifest.bridges
    op, samples = read_sample_file(samples_of(manifest))
    assert op == bridge.op
    assert samples
    # the samples are the ones the manifest's evidence lists as captured
    assert all(s.label.startswith("captured ") for s in samples)
    assert all(any(f"({s.label})" in line for line in bridge.checked) for s in samples)
    assert getattr(manifest.load(), "table", None) == {bridge.op: bridge.candidate}
    tried = [r for r in bridge.releases if r in VERIFIED_AT]
    assert tried, bridge.releases
    overload = resolve_op(op)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in tried:
            release = spyre_sim.resolve_stack(name)
            assert refuses(overload, samples, release), f"{name} runs {op}: no bridge needed"
            verdict = validate(overload, bridge.candidate, samples, release)
            assert verdict.holds, (name, verdict.reason)
