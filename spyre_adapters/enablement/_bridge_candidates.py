"""One op's candidates in the bridge loop: capturing the real arguments of the call that
raised (:class:`Capture`), whether a release refuses the op on them (:func:`refuses`), the
first candidate form that holds on them and on variants (:func:`choose_candidate`), and the
generated bridges already installed at a release (:func:`installed_bridges`). See
:mod:`spyre_adapters.enablement.bridge`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from spyre_adapters.enablement.op_samples import Sample, sample_of, variants
from spyre_adapters.enablement.op_validation import Verdict, validate
from spyre_adapters.library import op_bridge
from spyre_adapters.library.op_bridge import op_name

if TYPE_CHECKING:
    from spyre_adapters.registry import Registry
    from spyre_sim.catalogue import Release

__all__ = ["Capture", "available", "choose_candidate", "installed_bridges", "refuses"]


class Capture(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the arguments of the first call of each op that raises a lowering error, and
    whether it was issued inside the model scope."""

    def __init__(self, family: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.family = family
        self.failed: dict[str, tuple[Sample, bool]] = {}

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        from spyre_sim import in_model_scope
        from spyre_sim.errors import SpyreLoweringError

        try:
            return func(*args, **(kwargs or {}))
        except SpyreLoweringError as error:
            name = op_name(func)
            if error.op == name and name not in self.failed:
                where = error.module_path or "the model"
                sample = sample_of(args, kwargs or {}, f"captured in {self.family} ({where})")
                self.failed[name] = (sample, in_model_scope())
            raise


def installed_bridges(registry: Registry, release: Release) -> dict[str, tuple[str, str]]:
    """Op -> (adapter name, candidate) of the generated bridges the lifecycle applies at
    ``release``."""
    from spyre_adapters.lifecycle import Lifecycle

    found: dict[str, tuple[str, str]] = {}
    for manifest in Lifecycle(registry).resolve(release):
        for bridge in manifest.bridges:
            found.setdefault(bridge.op, (manifest.name, bridge.candidate))
    return found


def refuses(
    op: OpOverload, samples: Sequence[Sample], release: Release, *, layout_checks: bool = True
) -> bool:
    """Whether ``release`` refuses ``op`` itself on one of the captured ``samples`` (a lowering
    error naming the op that is not a layout rule): where it does not, no bridge is needed."""
    import warnings

    from torch.utils._pytree import tree_map

    import spyre_sim
    from spyre_sim.errors import SpyreLayoutError, SpyreLoweringError

    def to_device(value: Any) -> Any:
        return value.to("spyre") if hasattr(value, "to") and hasattr(value, "dtype") else value

    for sample in samples:
        with (
            warnings.catch_warnings(),
            spyre_sim.use_stack(release),
            spyre_sim.configure(layout_checks=layout_checks, judge_harness=False),
        ):
            warnings.simplefilter("ignore")
            try:
                args, kwargs = tree_map(to_device, (list(sample.args), dict(sample.kwargs)))
                with spyre_sim.model_scope():
                    op(*args, **kwargs)
            except SpyreLayoutError:
                continue
            except SpyreLoweringError as error:
                if error.op == op_name(op):
                    return True
            except Exception:  # the device cannot hold the inputs, or the kernel refuses
                continue
    return False


def available(op: OpOverload) -> list[str]:
    """The candidates the loop tries for ``op``, in order: the first op-bridge form's
    (:func:`~spyre_adapters.library.op_bridge.available`, ``host`` last of them), then the third
    form's ``host-float32`` (:mod:`spyre_adapters.library.op_bridge_v3`) for an op that writes
    no input (its writes would land in the float32 copies)."""
    found = op_bridge.available(op)
    return found if op_bridge._written(op) else [*found, "host-float32"]


def choose_candidate(
    op: OpOverload,
    samples: Sequence[Sample],
    release: Release,
    *,
    layout_checks: bool = True,
    only: Sequence[str] | None = None,
) -> list[Verdict]:
    """Validate the candidates of ``op`` in order on ``samples`` plus variants of the first
    one, up to the first that holds. Returns every verdict (the last holds, if any did)."""
    from spyre_sim.catalogue import GapState

    bf16 = release.gap_states.get("bf16") is GapState.CLOSED
    checked = [*samples, *variants(samples[0], bf16=bf16, op=op)] if samples else []
    verdicts = []
    for kind in only if only is not None else available(op):
        verdict = validate(op, kind, checked, release, layout_checks=layout_checks)
        verdicts.append(verdict)
        if verdict.holds:
            break
    return verdicts
