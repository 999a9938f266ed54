"""What docs/STACK.md says of each gap and op, release by release: the expectations
test_catalogue checks the built-in catalogue against (§5, §6, §8)."""

from __future__ import annotations

from spyre_sim.catalogue import Decision, GapNature, GapState

# X: open (fails), F: fallback, M: miscompiled, C: closed
X, F, M, C = GapState.OPEN, GapState.FALLBACK, GapState.MISCOMPILED, GapState.CLOSED
NATIVE, DECOMPOSED = Decision.NATIVE, Decision.DECOMPOSED
FALLBACK, UNSUPPORTED = Decision.FALLBACK, Decision.UNSUPPORTED

# The state of each gap at each release (order of RELEASES), written from docs/STACK.md.
TIMELINES: dict[str, tuple[GapState, ...]] = {
    # docs/STACK.md §6
    "sin-cos": (F, F, F, F, F, F, F, C),
    "rotate-half": (M, M, M, M, M, M, M, M),
    "offset-slice": (X, X, X, X, C, C, C, C),
    "dtype-cast": (X, X, X, X, X, C, C, C),  # casts 2026.05, norm upcast 2026.07
    "pow": (X, X, C, C, C, C, C, C),
    "tril-triu": (X, X, F, F, F, F, F, F),  # triu native 2026.09, tril still falls back
    "embedding": (X, F, F, F, F, F, C, C),
    "sdpa": (X, X, C, C, C, C, C, C),
    "sdpa-gqa": (X, X, X, C, C, C, C, C),
    "conv2d": (X, X, X, X, C, C, C, C),
    "masked-scatter": (X, X, X, X, X, X, C, C),
    "layernorm-nan": (M, M, M, M, M, M, M, M),
    "sdpa-strided": (C, C, C, M, M, M, M, C),  # clone dropped May 20 (#2196), fixed #4331
    "mem-pool": (C, C, C, C, C, C, M, C),
    "stick-align": (X, X, X, X, X, X, X, X),
    "sub-stick-head": (X, X, X, X, X, X, X, X),
    "core-span": (X, X, X, X, X, X, X, X),
    "no-inf": (M, M, M, M, M, M, M, M),
    "fp32-storage": (M, M, M, M, M, M, M, M),
    "static-shapes": (X, X, X, X, X, X, X, X),
    # added ids, from the rules of docs/STACK.md §2, §3 and §5
    "rank-4d": (X, C, C, C, C, C, C, C),
    "bool-storage": (X, C, C, C, C, C, C, C),
    "bf16": (X, X, X, C, C, C, C, C),
    "zero-length": (X, X, X, C, C, C, C, C),
    "linear": (X, C, C, C, C, C, C, C),
    "full": (X, C, C, C, C, C, C, C),
    "device-copy": (X, C, C, C, C, C, C, C),
    "ones": (X, X, C, C, C, C, C, C),
    "softmax": (X, X, C, C, C, C, C, C),
    "layer-norm": (X, X, C, C, C, C, C, C),
    "cat-stack": (X, X, C, C, C, C, C, C),
    "host-sync": (X, X, F, F, F, F, F, F),
    "isin": (X, X, F, F, F, F, F, F),
    "arange": (F, F, F, F, F, F, F, F),
    "topk": (X, X, X, C, C, C, C, C),
    "cumsum": (X, X, X, F, F, F, F, F),
    "argmax": (X, X, X, F, F, F, F, F),
    "bitwise": (X, X, X, F, F, F, F, F),
    "any-all": (X, X, X, F, F, F, F, C),
    "indirect-access": (X, X, X, X, F, F, F, F),
    "unfold": (X, X, X, X, C, C, C, C),
    "im2col": (X, X, X, X, X, X, X, X),
    "prod": (X, X, X, X, X, C, C, C),
    "flip": (X, X, X, X, X, X, C, C),
    "slice-scatter": (X, X, X, X, X, X, C, C),
    "pooling": (X, X, X, X, X, X, C, C),
    "gemma-rmsnorm": (X, X, X, X, X, X, X, C),
    "sort": (X, X, X, X, X, X, X, X),
    "moe-topk": (X, X, X, X, X, X, C, C),  # k split over the cores from Aug 17 (#3782)
    "bool-index": (X, X, X, X, X, X, X, X),
    "masked-fill": (X, X, X, F, F, F, F, F),
    "unlowered-op": (X, X, X, X, X, X, X, X),
    "indexed-dim": (M, M, M, M, M, M, C, C),  # layouts enforced from 2026.08 (#3409, #3882)
    # newer evidence, docs/STACK.md §8
    "fp32-reduce-rows": (M, M, M, M, M, M, C, C),  # #3804, fixed Aug 24
    "sdpa-seq-align": (M, M, M, M, M, M, M, M),  # #3113, still open
    "offset-view-input": (M, M, M, M, M, M, M, C),  # #4594, fixed Sep 16
    "decode-query-layout": (C, C, C, C, C, M, C, C),  # fused SDPA Jul 9, #3926 Aug 21
    "scratchpad-placement": (C, C, C, C, M, M, C, C),  # #2868 Jun 25, #4027 Aug 25
    "topk-split": (X, X, X, X, X, X, X, X),
    "topk-largest": (M, M, M, M, M, M, M, M),
    "pow-exponent": (X, X, X, X, X, X, X, C),  # #4479, Sep 11
    "pow-cube": (M, M, M, M, M, M, M, C),  # #4009, fixed by #4479
    "pow-int-base": (X, X, X, X, X, X, X, X),
    "pow-tensor-exponent": (X, X, X, X, X, X, X, X),  # #1852
    "nan-entry": (M, M, M, M, M, M, M, M),  # #4700
    "nan-inf-test": (X, X, X, X, X, X, X, X),
    "loss": (X, X, X, X, X, X, X, X),
    "linalg": (X, X, X, X, X, X, X, X),
    "histc": (X, X, X, X, X, X, X, X),  # #3982, #4071
}

SPYRE_NATURES = {
    "sin-cos": GapNature.TRANSITIONAL,
    "rotate-half": GapNature.TRANSITIONAL,
    "offset-slice": GapNature.TRANSITIONAL,
    "dtype-cast": GapNature.TRANSITIONAL,
    "pow": GapNature.TRANSITIONAL,
    "tril-triu": GapNature.TRANSITIONAL,
    "embedding": GapNature.TRANSITIONAL,
    "sdpa": GapNature.TRANSITIONAL,
    "sdpa-gqa": GapNature.TRANSITIONAL,
    "conv2d": GapNature.TRANSITIONAL,
    "masked-scatter": GapNature.TRANSITIONAL,
    "layernorm-nan": GapNature.TRANSITIONAL,
    "mem-pool": GapNature.REGRESSION,
    "stick-align": GapNature.LASTING,
    "sub-stick-head": GapNature.LASTING,
    "core-span": GapNature.LASTING,
    "no-inf": GapNature.LASTING,
    "fp32-storage": GapNature.LASTING,
    "static-shapes": GapNature.LASTING,
}

# (op packet, overload, release, decision) read off docs/STACK.md §5 and §8.
SPYRE_DECISIONS = [
    ("aten.mm", "default", "2025.12", NATIVE),
    ("aten.gelu", "default", "2025.12", NATIVE),
    ("aten.where", "self", "2025.12", NATIVE),
    ("aten.view", "default", "2025.12", NATIVE),
    ("aten.permute", "default", "2025.12", NATIVE),
    ("aten.arange", "start", "2025.12", FALLBACK),
    ("aten.arange", "start", "2026.09", FALLBACK),
    ("aten.sin", "default", "2025.12", FALLBACK),
    ("aten.sin", "default", "2026.08", FALLBACK),
    ("aten.sin", "default", "2026.09", NATIVE),
    ("aten.cos", "default", "2026.09", NATIVE),
    ("aten.embedding", "default", "2025.12", UNSUPPORTED),
    ("aten.embedding", "default", "2026.02", FALLBACK),
    ("aten.embedding", "default", "2026.08", NATIVE),
    ("aten._softmax", "default", "2026.02", UNSUPPORTED),
    ("aten._softmax", "default", "2026.03", NATIVE),
    ("aten.pow", "Tensor_Scalar", "2026.02", UNSUPPORTED),
    ("aten.pow", "Tensor_Scalar", "2026.03", DECOMPOSED),  # pow(x, 2) -> x * x (#1005)
    ("aten.pow", "Tensor_Tensor", "2026.09", UNSUPPORTED),  # #1852
    ("aten._to_copy", "default", "2026.03", UNSUPPORTED),
    ("aten._to_copy", "default", "2026.05", NATIVE),
    ("aten.addmm", "default", "2025.12", UNSUPPORTED),
    ("aten.addmm", "default", "2026.02", DECOMPOSED),
    ("aten.full", "default", "2026.02", NATIVE),
    ("aten.copy_", "default", "2025.12", UNSUPPORTED),
    ("aten.copy_", "default", "2026.02", NATIVE),
    ("aten.ones", "default", "2026.03", DECOMPOSED),
    ("aten.silu", "default", "2026.03", NATIVE),
    ("aten.native_layer_norm", "default", "2026.03", NATIVE),
    ("aten.gt", "Tensor", "2026.02", UNSUPPORTED),
    ("aten.gt", "Tensor", "2026.03", NATIVE),
    ("aten.cat", "default", "2026.03", NATIVE),
    ("aten.tril", "default", "2026.02", UNSUPPORTED),
    ("aten.tril", "default", "2026.03", FALLBACK),
    ("aten.tril", "default", "2026.09", FALLBACK),
    ("aten.triu", "default", "2026.09", FALLBACK),  # still on the host (#4647, #4029)
    ("aten.index", "Tensor", "2026.06", FALLBACK),
    ("aten.index", "Tensor", "2026.08", NATIVE),  # compiled gathers (#3434)
    ("aten.index_copy_", "default", "2026.08", NATIVE),  # KV-cache write (#2443, #3409)
    ("aten.index_copy", "default", "2026.09", FALLBACK),  # eager functional form: host
    ("aten.nll_loss_forward", "default", "2026.09", UNSUPPORTED),
    ("aten.mse_loss", "default", "2026.02", UNSUPPORTED),
    ("aten.mse_loss", "default", "2026.03", DECOMPOSED),
    ("aten.binary_cross_entropy_with_logits", "default", "2025.12", DECOMPOSED),
    ("aten.isinf", "default", "2026.09", UNSUPPORTED),
    ("aten.pixel_shuffle", "default", "2026.02", DECOMPOSED),
    ("aten.linalg_cholesky_ex", "default", "2026.09", UNSUPPORTED),
    ("aten.abs_", "default", "2025.12", NATIVE),  # in-place abs (SigLIP 2, Transformers 5.25)
    ("aten.scatter_add_", "default", "2026.09", UNSUPPORTED),  # no eager kernel (#4396)
    ("aten.isin", "Tensor_Tensor", "2026.03", FALLBACK),
    ("aten.isin", "Tensor_Tensor", "2026.09", FALLBACK),
    ("aten._local_scalar_dense", "default", "2026.03", FALLBACK),
    ("aten._scaled_dot_product_flash_attention_for_cpu", "default", "2026.02", UNSUPPORTED),
    ("aten._scaled_dot_product_flash_attention_for_cpu", "default", "2026.03", DECOMPOSED),
    ("aten._scaled_dot_product_flash_attention_for_cpu", "default", "2026.07", NATIVE),
    ("aten.topk", "default", "2026.05", NATIVE),
    ("aten.floor", "default", "2026.05", NATIVE),
    ("aten.minimum", "default", "2026.05", NATIVE),
    ("aten.constant_pad_nd", "default", "2026.05", NATIVE),
    ("aten.cumsum", "default", "2026.03", UNSUPPORTED),
    ("aten.cumsum", "default", "2026.05", FALLBACK),
    ("aten.cumsum", "default", "2026.09", FALLBACK),
    ("aten.argmax", "default", "2026.09", FALLBACK),
    ("aten.argmin", "default", "2026.09", FALLBACK),
    ("aten.bitwise_or", "Tensor", "2026.09", FALLBACK),
    ("aten.convolution", "default", "2026.05", UNSUPPORTED),
    ("aten.convolution", "default", "2026.06", DECOMPOSED),
    ("aten.convolution", "default", "2026.08", NATIVE),
    ("aten.unfold", "default", "2026.06", NATIVE),
    ("aten.gather", "default", "2026.05", UNSUPPORTED),
    ("aten.gather", "default", "2026.06", FALLBACK),
    ("aten.index_copy_", "default", "2026.06", FALLBACK),
    ("aten.prod", "default", "2026.07", NATIVE),
    ("aten.index_select", "default", "2026.08", NATIVE),
    ("aten.slice_scatter", "default", "2026.08", NATIVE),
    ("aten.masked_scatter", "default", "2026.07", UNSUPPORTED),
    ("aten.masked_scatter", "default", "2026.08", NATIVE),
    ("aten.flip", "default", "2026.08", NATIVE),
    ("aten.avg_pool2d", "default", "2026.08", NATIVE),
    ("aten.index_add", "default", "2026.09", NATIVE),
    ("aten.any", "dim", "2026.09", NATIVE),
    ("aten.all", "default", "2026.09", NATIVE),
    ("aten.sort", "default", "2026.09", UNSUPPORTED),
    ("aten.im2col", "default", "2026.09", UNSUPPORTED),
]

# Ops the emulated device sees (post-autograd, wrapper subclass) that the CPU census lacks.
DEVICE_OPS = [
    "aten._safe_softmax",
    "aten._softmax",
    "aten.addmm",
    "aten.mm",
    "aten.bmm",
    "aten.t",
    "aten._unsafe_view",
    "aten.empty_strided",
    "aten.empty",
    "aten.copy_",
    "aten._copy_from",
    "aten._copy_from_and_resize",
    "aten._to_copy",
    "aten.detach",
    "aten.alias",
    "aten.lift_fresh",
    "aten.masked_fill",
    "aten.fill_",
    "aten.zero_",
    "aten.argmax",
    "aten.isin",
    "aten.any",
    "aten.all",
    "aten.logical_not",
    "aten.logical_and",
    "aten.logical_or",
    "aten.logical_xor",
    "aten.bitwise_and",
    "aten.bitwise_or",
    "aten.bitwise_xor",
    "aten.bitwise_not",
    "aten.sym_size",
    "aten.sym_stride",
    "aten.sym_numel",
    "aten._local_scalar_dense",
    "aten.index",
    "aten.slice",
    "aten.select",
    "aten.split",
    "aten.unbind",
    "aten.narrow",
    "aten.native_layer_norm",
    "aten.embedding",
    "aten.convolution",
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten.scaled_dot_product_attention",
]

LAYOUT_OPS = [
    "aten.view",
    "aten.reshape",
    "aten.permute",
    "aten.transpose",
    "aten.expand",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.clone",
    "aten.contiguous",
    "aten.detach",
    "aten.alias",
    "aten.t",
    "aten._unsafe_view",
    "aten.slice",
]
