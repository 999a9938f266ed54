"""``rms-norm`` 1.1.0: the 1.0.0 RMSNorm at the input dtype, kept while an fp32 reduction over
more than 32 rows is wrong (gaps ``dtype-cast``, ``pow`` and ``fp32-reduce-rows``).

1.0.0 retired at 2026.07, where the stack runs the stock RMSNorm's fp32 upcast. At 2026.07 an
fp32 ``mean(-1)`` over more than 32 rows returns the rows after the 32nd as zero (torch-spyre
#3804, fixed Aug 24; docs/STACK.md §8), and the stock RMSNorm's variance is exactly that
reduction: a Llama prompt of more than 32 tokens is wrong there (cosine 0.04 against the CPU
at 40 tokens). This version lists ``fp32-reduce-rows`` as well, so it stays active at 2026.07;
its statistics at the input dtype reduce no fp32 values. What it matches and how it computes
is 1.0.0's (:mod:`spyre_adapters.library.rms_norm`), reused unchanged.
"""

from __future__ import annotations

from spyre_adapters.library.rms_norm import RmsNormInputDtype

__all__ = ["adapter"]

adapter = RmsNormInputDtype()
