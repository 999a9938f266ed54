"""Building a drawn case: :func:`build_case` builds the family at the case's sizes (no
download), redraws every weight matrix from a seeded normal scaled by its fan-in, pads the batch
as drawn, and records the CPU reference of the stock model in fp32 at the positions that hold a
token (with one decode step after the prefill when drawn). See
:mod:`spyre_adapters.enablement.differential`.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spyre_adapters.enablement._differential_cases import Case
from spyre_adapters.enablement.families import (
    FP16_SMALLEST_NORMAL,
    MIN_COMPARED_VALUES,
    BuiltFamily,
    build_family,
)
from spyre_adapters.enablement.size_presets import FamilyBuildError

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["build_case"]


@dataclass
class _Compared(BuiltFamily):
    """A built family whose runs return only the positions that hold a token, and, with
    ``next_ids``, the logits of one decode step after the prefill (KV cache on the device)."""

    valid: torch.Tensor | None = None
    next_ids: torch.Tensor | None = None
    cache_name: str = "cache"

    def run(self, model: nn.Module, device: str | torch.device = "cpu") -> torch.Tensor:
        if self.next_ids is None:
            return _positions(super().run(model, device).cpu(), self.valid)
        import torch

        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        feed = {
            name: (v.to(dtype) if v.is_floating_point() and dtype else v).to(device)
            for name, v in self.inputs.items()
        }
        step: dict[str, Any] = {"input_ids": self.next_ids.to(device), "use_cache": True}
        mask = self.inputs.get("attention_mask")
        if mask is not None:  # built on the host: harness work, not the model's
            step["attention_mask"] = torch.cat([mask, torch.ones_like(mask[:, :1])], -1).to(device)
        with torch.no_grad():
            prefill = model(**feed, use_cache=True)
            step[self.cache_name] = getattr(prefill, self.cache_name)
            decoded = model(**step)
        first = _positions(prefill.logits.cpu(), self.valid)
        vocab = first.shape[-1]
        return torch.cat([first.reshape(-1, vocab), decoded.logits.cpu().reshape(-1, vocab)])


def _positions(output: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    if valid is None or output.dim() < 2 or tuple(output.shape[:2]) != tuple(valid.shape):
        return output
    return output[valid]


def _rescale_weights(model: nn.Module, seed: int) -> None:
    """Redraw every weight of two or more dims from N(0, 1/fan_in); vectors (norm weights,
    biases) keep their initial values (a norm that adds one to its weight starts at zero)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _name, param in model.named_parameters():
            if param.dim() < 2 or not param.is_floating_point():
                continue
            fan_in = param.shape[-1] if param.dim() == 2 else math.prod(param.shape[1:])
            fresh = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            param.copy_(fresh / math.sqrt(max(fan_in, 1)))


def _padded(
    inputs: dict[str, torch.Tensor], padding: str, pad_id: int, accepts_mask: bool
) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """The inputs with every row after the first padded (``padding`` ``"left"``/``"right"``),
    and the positions that hold a token; ``None`` when nothing is padded."""
    import torch

    ids = inputs.get("input_ids")
    if padding == "none" or ids is None or not accepts_mask:
        return inputs, None
    batch, seq = ids.shape
    valid = torch.ones(batch, seq, dtype=torch.bool)
    for row in range(1, batch):
        length = max(1, seq * (batch - row) // batch)
        if padding == "right":
            valid[row, length:] = False
        else:
            valid[row, : seq - length] = False
    feed = dict(inputs)
    for name in ("input_ids", "decoder_input_ids"):
        if name in feed and feed[name].shape == valid.shape:
            feed[name] = feed[name].masked_fill(~valid, pad_id)
    feed["attention_mask"] = valid.long()
    return feed, valid


def _pad_id(config: Any, vocab: int) -> int:
    for owner in (config, getattr(config, "text_config", None)):
        value = getattr(owner, "pad_token_id", None) if owner is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab:
            return value
    return 0


def _unjudgeable(reference: torch.Tensor) -> str | None:
    import torch

    if reference.numel() < MIN_COMPARED_VALUES:
        return f"{reference.numel()} compared value(s)"
    if not bool(torch.isfinite(reference).all()):
        return "the CPU reference is not finite"
    if float(reference.abs().max()) < FP16_SMALLEST_NORMAL:
        return "every value of the CPU reference vanishes in fp16"
    return None


def build_case(case: Case) -> BuiltFamily:
    """Build ``case`` (see :mod:`spyre_adapters.enablement.differential`); the CPU reference
    is the stock model's, in fp32, at the positions that hold a token.

    Raises :class:`~spyre_adapters.enablement.size_presets.FamilyBuildError` when the family does not build
    at the drawn sizes (stage ``"config"`` also when only the family's own widths would), or
    its CPU output cannot judge a run (stage ``"reference"``: too few values, not finite,
    vanishing in fp16, or another CPU forward of the stock model gives other values).
    """
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Transformers' notices about the drawn config
        built = build_family(case.family, preset=case.sizes, seed=case.seed, features=case.features)
        if built.fit != "preset":
            raise FamilyBuildError(
                case.family, "config", "the drawn sizes do not build (only the family's own do)"
            )
        model = built.model
        if case.attention is not None:
            try:
                model.set_attn_implementation(case.attention)  # type: ignore[operator]
            except Exception as exc:
                raise FamilyBuildError(case.family, "config", str(exc)[:300]) from exc
        _rescale_weights(model, case.seed)
        params = inspect.signature(model.forward).parameters
        inputs, valid = _padded(
            built.inputs,
            case.padding,
            _pad_id(built.config, case.sizes.vocab),
            "attention_mask" in params,
        )
        next_ids = None
        # Transformers 5.2x names the KV cache ``cache``, earlier 5.x ``past_key_values``
        cache_name = "cache" if "cache" in params else "past_key_values"
        decodes = built.kind == "causal-lm" and cache_name in params
        if case.decode and decodes and "input_ids" in inputs:
            generator = torch.Generator().manual_seed(case.seed)
            batch = inputs["input_ids"].shape[0]
            next_ids = torch.randint(0, case.sizes.vocab, (batch, 1), generator=generator)
        compared = _Compared(
            model_type=built.model_type,
            preset=built.preset,
            config=built.config,
            model=model,
            inputs=inputs,
            kind=built.kind,
            output_name=built.output_name,
            reference=built.reference,
            options=built.options,
            fit=built.fit,
            valid=valid,
            next_ids=next_ids,
            cache_name=cache_name,
        )
        try:
            reference = compared.run(model, "cpu").detach().float()
        except Exception as exc:
            raise FamilyBuildError(case.family, "forward", str(exc)[:300]) from exc
    why = _unjudgeable(reference)
    if why is not None:
        raise FamilyBuildError(case.family, "reference", why)
    compared.reference = reference
    # a forward that draws random numbers (ViLT samples image patches) has no reference a
    # run could match: every run of it would be a mismatch that says nothing
    why = compared.irreproducible()
    if why is not None:
        raise FamilyBuildError(
            case.family, "reference", f"{why} (its forward draws random numbers)"
        )
    return compared
