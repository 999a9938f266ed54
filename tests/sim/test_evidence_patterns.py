"""The corrections and new miscompiles of docs/STACK.md §8, run on the device at every release.

Each pattern below is the smallest program that meets one item of the newer evidence (a
correction of an older verdict, or a silent miscompile modelled as a new gap). It is run at
every built-in release, and what it must do there is read from the catalogue, not written
here: where one of its ops has no lowering or a gap it needs is open, it raises naming that
gap; where the op falls back, it runs on the host and matches the CPU; where its gap is
``miscompiled``, it returns wrong numbers and telemetry records the miscompile; elsewhere it
matches the CPU. A pattern the built-in releases never show open (or never closed) is also
run at a user release that opens (or closes) its gap, so that every item is seen both ways;
a lasting gap is never closed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch

from spyre_sim.catalogue import Decision, GapNature, GapState, Release

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.errors.SpyreSimWarning")


class Kind(enum.Enum):
    MISCOMPILE = "miscompile"  # runs with wrong numbers while the gap is miscompiled
    CAPABILITY = "capability"  # raises while the gap is open
    PLACEMENT = "placement"  # the op's rule says where it runs (device, host) or that it fails
    TRANSFER = "transfer"  # a property of values entering the device (a lasting gap)


class Seen(enum.Enum):
    RAISES = "raises"
    FALLBACK = "fallback"  # ran on the host, matched
    FLAGGED = "flagged"  # wrong numbers, the miscompile recorded
    MATCH = "match"  # ran on the device, matched


Run = Callable[[], tuple[torch.Tensor, torch.Tensor]]
"""Runs the pattern on the device: (device result on the host, CPU reference)."""


@dataclass(frozen=True)
class Pattern:
    gap: str
    kind: Kind
    ops: tuple[str, ...]  # op keys the pattern reaches; the first is the one the gap acts on
    run: Callable[[ModuleType], Run]
    needs: tuple[str, ...] = ()  # other gaps that stop the pattern while they are open
    atol: float = 5e-3


def _op(release: Release, key: str) -> tuple[Decision, str | None]:
    packet, _, overload = key.partition(":")
    rule = release.op_rule(packet, overload or "default")
    return rule.decision, rule.gap


def expected(pattern: Pattern, release: Release) -> tuple[Seen, frozenset[str]]:
    """What the catalogue says the pattern does at ``release``, and the gaps it may raise."""
    stops = {
        gap or "unlowered-op"
        for d, gap in (_op(release, k) for k in pattern.ops)
        if d is Decision.UNSUPPORTED
    }
    stops |= {g for g in pattern.needs if release.gap_open(g)}
    if pattern.kind is Kind.CAPABILITY and release.gap_open(pattern.gap):
        stops.add(pattern.gap)
    if stops:
        return Seen.RAISES, frozenset(stops)
    if pattern.kind is Kind.TRANSFER:  # a transfer is no op the stack compiles
        return Seen.FLAGGED if release.gap_open(pattern.gap) else Seen.MATCH, frozenset()
    decision, _ = _op(release, pattern.ops[0])
    if decision is Decision.FALLBACK:
        return Seen.FALLBACK, frozenset()
    if pattern.kind is Kind.MISCOMPILE and release.gap_state(pattern.gap) is GapState.MISCOMPILED:
        return Seen.FLAGGED, frozenset()
    return Seen.MATCH, frozenset()


def observe(spyre: ModuleType, pattern: Pattern, stack: str | Path) -> tuple[Seen, str]:
    """Run ``pattern`` at ``stack``; what happened, and the gap it raised with."""
    spyre.telemetry.reset()
    runner = pattern.run(spyre)
    with spyre.use_stack(stack):
        try:
            got, ref = runner()
        except spyre.SpyreLoweringError as error:
            return Seen.RAISES, error.gap
    snap = spyre.telemetry.snapshot()
    recorded = pattern.gap in snap.miscompiles or (
        pattern.kind is Kind.TRANSFER and pattern.gap in snap.gaps
    )
    close = got.shape == ref.shape and torch.allclose(
        got.float(), ref.float(), atol=pattern.atol, rtol=5e-3, equal_nan=True
    )
    if recorded:
        assert not close, f"{pattern.gap} recorded at {stack} but the result is right"
        return Seen.FLAGGED, ""
    assert close, f"{pattern.gap} at {stack}: wrong numbers and nothing recorded"
    fell_back = any(op.partition(":")[0] in key for key in snap.fallbacks for op in pattern.ops[:1])
    return (Seen.FALLBACK if fell_back else Seen.MATCH), ""


# --- the patterns -----------------------------------------------------------------------------


def _dl16(spyre: ModuleType, t: torch.Tensor) -> torch.Tensor:
    return spyre.round_to_dl16(t.to(torch.float16))


def _topk_values(k: int, largest: bool = True) -> Callable[[ModuleType], Run]:
    def make(spyre: ModuleType) -> Run:
        host = _dl16(spyre, torch.randn(2, 256, generator=torch.Generator().manual_seed(k)))

        def run() -> tuple[torch.Tensor, torch.Tensor]:
            got = torch.topk(host.to("spyre"), k, largest=largest).values.cpu()
            return got, torch.topk(host, k, largest=largest).values

        return run

    return make


def _gather(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.randn(8, 64))
    index = torch.tensor([5, 0, 3])

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        return host.to("spyre")[index.to("spyre")].cpu(), host[index]

    return run


def _index_copy_inplace(spyre: ModuleType) -> Run:
    cache, new = _dl16(spyre, torch.zeros(1, 8, 64)), _dl16(spyre, torch.randn(1, 2, 64))
    where = torch.tensor([6, 7])

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        device = cache.to("spyre")
        device.index_copy_(1, where.to("spyre"), new.to("spyre"))  # HF's KV-cache write
        return device.cpu(), cache.clone().index_copy_(1, where, new)

    return run


def _index_copy_functional(spyre: ModuleType) -> Run:
    cache, new = _dl16(spyre, torch.zeros(1, 8, 64)), _dl16(spyre, torch.randn(1, 2, 64))
    where = torch.tensor([1, 4])

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        got = torch.index_copy(cache.to("spyre"), 1, where.to("spyre"), new.to("spyre"))
        return got.cpu(), torch.index_copy(cache, 1, where, new)

    return run


def _index_select_inner(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.randn(4, 8, 64))
    index = torch.tensor([0, 2, 5])

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        got = torch.index_select(host.to("spyre"), 1, index.to("spyre"))  # not the outer dim
        return got.cpu(), torch.index_select(host, 1, index)

    return run


def _scatter_inner(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.zeros(4, 64))
    index = torch.tensor([[3, 1], [0, 2], [5, 4], [7, 6]])
    src = _dl16(spyre, torch.randn(4, 2))

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        got = host.to("spyre").scatter(1, index.to("spyre"), src.to("spyre"))
        return got.cpu(), host.scatter(1, index, src)

    return run


def _pow(exponent: float) -> Callable[[ModuleType], Run]:
    def make(spyre: ModuleType) -> Run:
        host = _dl16(spyre, torch.linspace(-2, 2, 128).reshape(2, 64))
        if exponent != int(exponent):
            host = host.abs() + 0.5

        def run() -> tuple[torch.Tensor, torch.Tensor]:
            return host.to("spyre").pow(exponent).cpu(), host.float().pow(exponent)

        return run

    return make


def _pow_int_base(spyre: ModuleType) -> Run:
    host = torch.arange(64, dtype=torch.int32).reshape(1, 64)

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        return host.to("spyre").pow(2).cpu(), host.pow(2)

    return run


def _pow_tensor_exponent(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.rand(1, 64) + 0.5)

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        x = host.to("spyre")
        return torch.pow(x, x).cpu(), torch.pow(host.float(), host.float())

    return run


def _nan_entry(spyre: ModuleType) -> Run:
    host = torch.tensor([[1.0, float("nan")] + [0.0] * 62], dtype=torch.float16)

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        return host.to("spyre").cpu(), host

    return run


def _fp32_mean(rows: int) -> Callable[[ModuleType], Run]:
    def make(spyre: ModuleType) -> Run:
        host = _dl16(spyre, torch.rand(rows, 128) + 0.5)

        def run() -> tuple[torch.Tensor, torch.Tensor]:
            got = host.to("spyre").to(torch.float32)  # the stock RMSNorm's upcast
            return (got * got).mean(-1, keepdim=True).cpu(), host.float().pow(2).mean(-1, True)

        return run

    return make


def _sdpa_keys(keys: int) -> Callable[[ModuleType], Run]:
    def make(spyre: ModuleType) -> Run:
        f = torch.nn.functional.scaled_dot_product_attention
        q = _dl16(spyre, torch.randn(1, 2, 4, 64))
        kv = _dl16(spyre, torch.randn(1, 2, keys, 64))

        def run() -> tuple[torch.Tensor, torch.Tensor]:
            dq, dkv = q.to("spyre"), kv.to("spyre")
            return f(dq, dkv, dkv).cpu(), f(q.float(), kv.float(), kv.float())

        return run

    return make


def _packed_view_copy(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.randn(8, 3 * 128))  # [tokens, q | k | v]

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        k = torch.split(host.to("spyre"), 128, dim=-1)[1]
        return k.contiguous().cpu(), host[:, 128:256]

    return run


def _decode_query(spyre: ModuleType) -> Run:
    f = torch.nn.functional.scaled_dot_product_attention
    qh = _dl16(spyre, torch.randn(1, 1, 4, 64))  # [b, 1, h, d]: q_proj(x).view(b, 1, h, d)
    kv = _dl16(spyre, torch.randn(1, 4, 9, 64))

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        q, dkv = qh.to("spyre").transpose(1, 2), kv.to("spyre")  # [b, h, 1, d]
        return f(q, dkv, dkv).cpu(), f(qh.transpose(1, 2).float(), kv.float(), kv.float())

    return run


def _one_row_norm(spyre: ModuleType) -> Run:
    host = _dl16(spyre, torch.rand(1, 1, 4096) + 0.5)  # one token: RMSNorm in decode

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        x = host.to("spyre")
        scale = torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        ref = host.float() * torch.rsqrt(host.float().pow(2).mean(-1, keepdim=True) + 1e-6)
        return (x * scale).cpu(), ref

    return run


_SDPA = "aten.scaled_dot_product_attention"

PATTERNS: dict[str, Pattern] = {
    # corrections
    "topk-k-50": Pattern("moe-topk", Kind.CAPABILITY, ("aten.topk",), _topk_values(50)),
    "topk-k-37": Pattern(
        "topk-split", Kind.CAPABILITY, ("aten.topk",), _topk_values(37), needs=("moe-topk",)
    ),
    "topk-smallest": Pattern(
        "topk-largest", Kind.MISCOMPILE, ("aten.topk",), _topk_values(3, largest=False)
    ),
    "gather": Pattern("indirect-access", Kind.PLACEMENT, ("aten.index:Tensor",), _gather),
    "index-copy-inplace": Pattern(
        "indirect-access", Kind.PLACEMENT, ("aten.index_copy_",), _index_copy_inplace
    ),
    "index-copy-functional": Pattern(
        "indirect-access", Kind.PLACEMENT, ("aten.index_copy",), _index_copy_functional
    ),
    "index-select-inner-dim": Pattern(
        "indexed-dim", Kind.MISCOMPILE, ("aten.index_select",), _index_select_inner
    ),
    # the emulator's indexed-dim reproduction acts on index_select; scatter itself is still a
    # fallback at 2026.09, so the host computes it right wherever it runs
    "scatter-inner-dim": Pattern(
        "indirect-access", Kind.PLACEMENT, ("aten.scatter:src",), _scatter_inner
    ),
    "pow-square": Pattern("pow", Kind.PLACEMENT, ("aten.pow:Tensor_Scalar",), _pow(2)),
    "pow-rsqrt": Pattern(
        "pow-exponent", Kind.CAPABILITY, ("aten.pow:Tensor_Scalar",), _pow(-0.5), atol=2e-3
    ),
    "pow-int-base": Pattern(
        "pow-int-base", Kind.CAPABILITY, ("aten.pow:Tensor_Scalar",), _pow_int_base
    ),
    "pow-tensor-exponent": Pattern(
        "pow-tensor-exponent", Kind.CAPABILITY, ("aten.pow:Tensor_Tensor",), _pow_tensor_exponent
    ),
    "pow-cube": Pattern(
        "pow-cube", Kind.MISCOMPILE, ("aten.pow:Tensor_Scalar",), _pow(3), atol=2e-2
    ),
    "nan-entry": Pattern("nan-entry", Kind.TRANSFER, (), _nan_entry),
    "fp32-mean": Pattern(
        "dtype-cast",
        Kind.CAPABILITY,
        ("aten._to_copy", "aten.mean:dim"),
        _fp32_mean(32),
        atol=1e-2,
    ),
    # silent miscompiles
    "fp32-mean-64-rows": Pattern(
        "fp32-reduce-rows",
        Kind.MISCOMPILE,
        ("aten.mean:dim", "aten._to_copy"),
        _fp32_mean(64),
        needs=("dtype-cast",),
        atol=1e-2,
    ),
    "sdpa-100-keys": Pattern(
        "sdpa-seq-align", Kind.MISCOMPILE, (_SDPA,), _sdpa_keys(100), needs=("rank-4d",)
    ),
    "packed-qkv-copy": Pattern(
        "offset-view-input", Kind.MISCOMPILE, ("aten.clone",), _packed_view_copy
    ),
    "decode-query": Pattern(
        "decode-query-layout", Kind.MISCOMPILE, (_SDPA,), _decode_query, needs=("rank-4d",)
    ),
    "one-row-norm": Pattern(
        "scratchpad-placement",
        Kind.MISCOMPILE,
        ("aten.mul:Tensor", "aten.mean:dim", "aten.rsqrt"),
        _one_row_norm,
        atol=1e-2,
    ),
}


def _user_release(tmp_path: Path, base: Release, gap: str, state: GapState) -> Path:
    """A release after ``base`` that only sets ``gap`` (and the ops whose rule names it)."""
    lines = [
        "schema_version = 1",
        "[release]",
        'name = "2099.1"',
        f'base = "{base.name}"',
        "date = 2099-01-01",
        f'summary = "{base.name} with {gap} {state.value}"',
        "[gaps]",
        f'{gap} = "{state.value}"',
    ]
    ops = [key for key, rule in base.op_rules.items() if rule.gap == gap]
    if state is GapState.CLOSED and ops:
        lines.append("[ops]")
        lines += [f'"{key}" = "decomposed"' for key in ops]
    path = tmp_path / f"{gap}-{state.value}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_does_what_the_catalogue_says_at_every_release(
    spyre: ModuleType, name: str
) -> None:
    pattern = PATTERNS[name]
    catalogue = spyre.builtin_catalogue()
    seen: dict[str, Seen] = {}
    for release in catalogue.releases:
        want, may_raise = expected(pattern, release)
        got, raised_gap = observe(spyre, pattern, release.name)
        assert got is want, (
            f"{name} at {release.name}: {got.value}, the catalogue says {want.value}"
        )
        if got is Seen.RAISES:
            assert raised_gap in may_raise, f"{name} at {release.name} raised {raised_gap}"
        seen[release.name] = got
    assert (
        Seen.MATCH in seen.values()
        or Seen.FALLBACK in seen.values()
        or (pattern.kind in (Kind.CAPABILITY, Kind.MISCOMPILE, Kind.TRANSFER))
    ), seen


def _open_state(pattern: Pattern) -> GapState:
    return (
        GapState.MISCOMPILED if pattern.kind in (Kind.MISCOMPILE, Kind.TRANSFER) else GapState.OPEN
    )


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_is_seen_open_and_closed(spyre: ModuleType, name: str, tmp_path: Path) -> None:
    """At a release where the gap is open the pattern fails as documented; at one where it is
    closed it matches the CPU. Releases are taken from the catalogue; a user release opens or
    closes the gap where no built-in release shows it so."""
    pattern = PATTERNS[name]
    catalogue = spyre.builtin_catalogue()
    failing = Seen.RAISES if pattern.kind is Kind.CAPABILITY else Seen.FLAGGED
    if pattern.kind is Kind.PLACEMENT:
        failing = Seen.RAISES
    reached = [r for r in catalogue.releases if not (set(pattern.needs) & _open_gaps(r))]
    opened = [
        r for r in reached if expected(pattern, r)[0] is failing and _stopped_by_gap(pattern, r)
    ]
    closed = [r for r in reached if _closed(pattern, r)]
    base = reached[-1] if reached else catalogue.newest
    open_at: str | Path = (
        opened[-1].name
        if opened
        else _user_release(tmp_path, base, pattern.gap, _open_state(pattern))
    )
    got, raised = observe(spyre, pattern, open_at)
    assert got is failing, f"{name} with {pattern.gap} open ({open_at}): {got.value}"
    if got is Seen.RAISES:
        assert raised == pattern.gap
    if catalogue.gap(pattern.gap).nature is GapNature.LASTING:
        assert not closed, f"{pattern.gap} is lasting"
        return
    close_at: str | Path = (
        closed[0].name if closed else _user_release(tmp_path, base, pattern.gap, GapState.CLOSED)
    )
    got, _ = observe(spyre, pattern, close_at)
    assert got in (Seen.MATCH, Seen.FALLBACK), f"{name} with {pattern.gap} closed ({close_at})"


def _closed(pattern: Pattern, release: Release) -> bool:
    """Whether the pattern's gap no longer stops it at ``release``: the gap is closed, or, for
    an op placed by its rule, the op lowers although the gap still holds other ops."""
    if pattern.kind is Kind.PLACEMENT:
        return (
            _op(release, pattern.ops[0])[0].runs_on_device
            and expected(pattern, release)[0] is Seen.MATCH
        )
    return not release.gap_open(pattern.gap) and expected(pattern, release)[0] in (
        Seen.MATCH,
        Seen.FALLBACK,
    )


def _open_gaps(release: Release) -> set[str]:
    return {g for g in release.gap_states if release.gap_open(g)}


def _stopped_by_gap(pattern: Pattern, release: Release) -> bool:
    """Whether the pattern fails at ``release`` because of its own gap (not of another)."""
    want, may_raise = expected(pattern, release)
    if want is Seen.RAISES:
        return may_raise == {pattern.gap}
    return want is Seen.FLAGGED
