"""Does a device output match the CPU? The one rule, for triage, the sweep and the plugin.

:func:`compare` measures a device output (already on the host) against its CPU reference, in
float64:

- ``cosine``: the cosine similarity of the flattened outputs; ``1.0`` when both are all zeros,
  ``0.0`` when only one is, NaN when an output is not finite or the shapes differ;
- ``max_abs_error``: the largest absolute difference (``inf`` when not finite or the shapes
  differ; ``0.0`` for empty outputs);
- for logits (``logits=True``: the last axis is a vocabulary), ``top1``: the fraction of
  positions where the device's greedy token is the CPU's, over the positions the CPU decides
  (``scored``): a position whose two best CPU logits are closer than :data:`TIE_MARGIN` of the
  position's logit range is a tie that any rounding may flip, and is not scored (when no
  position is scored, every position counts for ``top1``).

``matches`` (how real teams judge "it works" on the device): cosine >= :data:`MIN_COSINE`, and
for logits the CPU's greedy token at every scored position.

:func:`decoding` judges a greedy generation the same way, step by step: the device's tokens
must be the CPU's until the first step where the CPU's two best scores are a tie; from a tie
that the device decides otherwise on, the two continue from different text and are not
compared further.

``positions`` (a boolean mask over the leading dims of the output, e.g. ``[batch, sequence]``)
restricts the comparison to the positions that carry meaning: :func:`padding_positions` gives
it from a model's inputs, so that padded positions (attention mask 0) are not compared. Their
values are not defined by the model: a query row whose every key is masked gets 0 from
PyTorch's SDPA with a boolean mask, the mean of the values from an additive ``finfo.min`` mask
(Transformers' eager attention), NaN from some kernels; Transformers' own tests compare
attention implementations only at unpadded positions for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "MIN_COSINE",
    "TIE_MARGIN",
    "Comparison",
    "Decoding",
    "compare",
    "decoding",
    "facts",
    "padding_positions",
]

#: Minimum cosine similarity of device output vs CPU output (the device bar of real teams).
MIN_COSINE = 0.99
#: Logits: CPU top-2 margins below this fraction of the position's logit range are ties.
TIE_MARGIN = 0.01


@dataclass(frozen=True)
class Comparison:
    """Device output vs CPU reference. ``top1`` is the agreement over ``scored`` positions
    (logits only); ``matches`` applies the criterion named by ``criterion``."""

    matches: bool
    cosine: float
    max_abs_error: float
    top1: float | None = None
    scored: int = 0
    criterion: str = ""


def padding_positions(
    inputs: Mapping[str, torch.Tensor], output: torch.Tensor, output_name: str
) -> torch.Tensor | None:
    """The unpadded positions of ``output`` (``True`` where compared), from the attention mask
        of the inputs it was computed from: ``decoder_attention_mask`` for a decoder's output of an
        encoder-decoder, else ``attention_mask``. ``None`` (compare everything) when there is no
        such mask, it does not cover the output's leading dims, or it masks every position. An output
    sequence shorter than the mask (an audio encoder's subsampling) keeps the frames each row's
    unpadded prefix reaches (see :func:`_subsampled`)."""
    name = "attention_mask"
    if "decoder_attention_mask" in inputs and not output_name.startswith("encoder"):
        name = "decoder_attention_mask"
    mask = inputs.get(name)
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.is_floating_point():
        return None
    if output.dim() < 2 or output.shape[0] != mask.shape[0]:
        return None
    keep = mask.detach().cpu() != 0
    if output.shape[1] != mask.shape[1]:
        if output.dim() < 3:  # not a sequence of vectors (a pooled [batch, hidden] output)
            return None
        subsampled = _subsampled(keep, int(output.shape[1]))
        if subsampled is None:
            return None
        keep = subsampled
    return keep if bool(keep.any()) else None


def _subsampled(keep: torch.Tensor, length: int) -> torch.Tensor | None:
    """The unpadded positions of a sequence subsampled to ``length`` from one whose unpadded
    positions are ``keep`` (an audio encoder's strided convolutions: ``[B, 1024]`` frames in,
    ``[B, 128]`` out). Transformers' audio models read such a mask as lengths
    (``attention_mask.sum(-1)`` through the convolutions' output-length arithmetic), so a row
    of ``n`` unpadded frames keeps the ``ceil(n * length / frames)`` output frames its first
    ``n`` frames reach at least partly. ``None`` unless the sequence is shortened."""
    frames = int(keep.shape[1])
    if not 0 < length < frames:
        return None
    counts = keep.sum(dim=1)
    reached = (counts * length + frames - 1) // frames
    return torch.arange(length)[None, :] < reached[:, None]


def _decided(rows: torch.Tensor) -> torch.Tensor:
    """Per row of scores (``[N, vocab]``), whether the best is not a tie: the two best are
    not within :data:`TIE_MARGIN` of the range of the row's finite scores (a score a logits
    processor set to ``-inf``, a suppressed end-of-sequence token, would make every range
    infinite and every step a tie; a row whose margin is NaN is not a tie: it is judged)."""
    top2 = rows.topk(2, dim=-1).values
    finite = torch.isfinite(rows)
    high = rows.masked_fill(~finite, -math.inf).max(dim=-1).values
    low = rows.masked_fill(~finite, math.inf).min(dim=-1).values
    spread = (high - low).nan_to_num(posinf=0.0, neginf=0.0).clamp_min(1e-12)
    return ~((top2[:, 0] - top2[:, 1]) <= TIE_MARGIN * spread)


def compare(
    reference: torch.Tensor,
    output: torch.Tensor,
    *,
    logits: bool,
    positions: torch.Tensor | None = None,
) -> Comparison:
    """Compare a device output (already on the host) with the CPU reference (module doc);
    ``positions``: only these leading-dim positions (see :func:`padding_positions`)."""
    ref = reference.detach().cpu().to(torch.float64)
    out = output.detach().cpu().to(torch.float64)
    if ref.shape != out.shape:
        return Comparison(False, math.nan, math.inf, criterion="shape differs")
    if positions is not None:
        if tuple(positions.shape) != tuple(ref.shape[: positions.dim()]):
            raise ValueError(
                f"positions of shape {list(positions.shape)} do not cover the leading dims of "
                f"an output of shape {list(ref.shape)}"
            )
        keep = positions.cpu()
        ref, out = ref[keep], out[keep]
    finite = bool(torch.isfinite(out).all()) and bool(torch.isfinite(ref).all())
    a, b = ref.flatten(), out.flatten()
    denom = float(a.norm() * b.norm())
    if not finite:
        cosine = math.nan
    elif denom > 0:
        cosine = float(torch.dot(a, b)) / denom
    else:
        cosine = 1.0 if bool(torch.equal(a, b)) else 0.0
    max_abs = math.inf
    if finite:
        max_abs = float((ref - out).abs().max()) if ref.numel() else 0.0
    cosine_ok = finite and cosine >= MIN_COSINE
    if not logits or ref.dim() < 2 or ref.shape[-1] < 2:
        return Comparison(cosine_ok, cosine, max_abs, criterion=f"cosine >= {MIN_COSINE}")
    ref2 = ref.reshape(-1, ref.shape[-1])
    out2 = out.reshape(-1, out.shape[-1])
    scored = _decided(ref2)
    agree = ref2.argmax(dim=-1) == out2.argmax(dim=-1)
    n_scored = int(scored.sum())
    counted = agree[scored] if n_scored else agree
    top1 = float(counted.to(torch.float64).mean())
    top1_ok = bool(agree[scored].all()) if n_scored else True
    return Comparison(
        matches=cosine_ok and top1_ok,
        cosine=cosine,
        max_abs_error=max_abs,
        top1=top1,
        scored=n_scored,
        criterion=f"greedy top-1 at every non-tied position and cosine >= {MIN_COSINE}",
    )


@dataclass(frozen=True)
class Decoding:
    """One row of a greedy generation on the device against the CPU's. ``compared``: the
    steps compared; ``diverged_at``: the first step whose token differs (``None`` when none
    does); ``at_tie``: the CPU's two best scores at that step were a tie (:data:`TIE_MARGIN`
    of the step's score range), which any rounding may decide either way."""

    compared: int
    diverged_at: int | None = None
    at_tie: bool = False

    @property
    def matches(self) -> bool:
        """No token differs, or the first that does was a tie."""
        return self.diverged_at is None or self.at_tie

    def describe(self) -> str:
        """``same 12 tokens``, ``differs at step 3 (a tie)``, ``differs at step 3``."""
        if self.diverged_at is None:
            return f"same {self.compared} tokens"
        return f"differs at step {self.diverged_at}" + (" (a tie)" if self.at_tie else "")


def decoding(
    cpu_scores: Sequence[torch.Tensor],
    cpu_tokens: torch.Tensor,
    device_tokens: torch.Tensor,
) -> list[Decoding]:
    """Per row, a greedy generation's new tokens on the device (``[batch, steps]``) against
    the CPU's, with the CPU's scores of each step (``steps`` tensors ``[batch, vocab]``, as
    ``generate(output_scores=True)`` returns them). A generation that stops early on one side
    (an end-of-sequence token) is compared over the shorter."""
    cpu = cpu_tokens.detach().cpu()
    device = device_tokens.detach().cpu()
    steps = min(cpu.shape[-1], device.shape[-1], len(cpu_scores))
    rows = []
    for row in range(cpu.shape[0]):
        found = Decoding(compared=steps)
        for step in range(steps):
            if int(cpu[row, step]) != int(device[row, step]):
                scores = cpu_scores[step][row].detach().cpu().to(torch.float64)
                found = Decoding(step + 1, step, not bool(_decided(scores[None])[0]))
                break
        rows.append(found)
    return rows


def facts(comparison: Comparison | None) -> str:
    """``cosine 0.9876, top-1 0.5`` for a verdict's detail (``no comparison`` for ``None``)."""
    if comparison is None:
        return "no comparison"
    return f"cosine {comparison.cosine:.4f}, top-1 {comparison.top1}"
