"""``pow-free-activation`` 1.1.0: the 1.0.0 rewrite, kept until the stack computes ``pow(x, 3)``
right (gaps ``pow`` and ``pow-cube``).

1.0.0 listed only gap ``pow`` (no pow on the device before 2026.03), so it retired at 2026.03.
But until 2026.09 the upstream multiply chain returns ``|x| ** 4`` for ``pow(x, 3)``, silently
(torch-spyre #4009; docs/STACK.md §8): the stock ``gelu_new`` of GPT-2, GPT-J, CodeGen, GPT-Neo
and Phi, ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``, is wrong there (a
GPT-2 forward at 2026.05: cosine 0.06 against the CPU). This version lists ``pow-cube`` as
well, so it stays active up to 2026.08. What it matches and how it computes is 1.0.0's
(:mod:`spyre_adapters.library.pow_free_activation`), reused unchanged.
"""

from __future__ import annotations

from spyre_adapters.library.pow_free_activation import PowFreeActivation

__all__ = ["adapter"]

adapter = PowFreeActivation()
