"""Layout and capability rules of the device, each tied to a gap id of the catalogue.

A rule is a small function that looks at one op call (the host tensors and arguments) and
returns the reason it cannot lower, or ``None``. It is active only while the catalogue says its
gap is open at the active release (``Release.gap_open(gap)``), and it is evaluated only when a
decision is not yet cached (the cache key holds dtypes, shapes and, for rules that read them,
the non-tensor arguments). Rules are registered with :func:`layout_rule` and evaluated in
registration order: the layout rules first, then the capability rules.

Two families:

- **layout** rules (``SpyreLayoutError``; switched off by ``configure(layout_checks=False)``):
  ``stick-align``, ``sub-stick-head``, ``offset-slice``, ``rank-4d``, ``zero-length``,
  ``core-span``;
- **capability** rules (``SpyreLoweringError``; always on): ``bf16``, ``dtype-cast``,
  ``sdpa-gqa``, ``moe-topk`` and ``topk-split`` (top-k's k), ``bool-index``, ``pow-exponent``
  and ``pow-int-base`` (pow's exponent and base).

The exact shapes that trigger each layout rule (a stick is 64 elements of a 2-byte dtype):

- ``stick-align``: ``mm``/``addmm`` (what ``nn.Linear`` reaches) whose reduction dim K (the
  input's last dim: hidden or intermediate size) is not a multiple of 64. Activation-by-
  activation ``bmm`` (attention: head_dim, sequence length) is not checked: the real stack pads
  those partial sticks. Real text: ``Unsupported stick expression``.
- ``sub-stick-head``: (a) a ``view``/``reshape`` that splits the last (stick) dim into several
  dims whose new last dim is shorter than a stick, e.g. ``[b, s, 64] -> [b, s, 4, 16]`` (heads
  of head_dim < 64; a ``-1`` is resolved as ``view`` resolves it, and adding unit dims, as in
  ``[4] -> [4, 1]``, is not a split); (b) a slice or split of a floating tensor's stick dim into
  two equal halves shorter than a stick (stock rotate_half with head_dim < 128: "RoPE needs
  head_dim / 2 >= 64", docs/STACK.md §3; integer index tensors cut in two are not RoPE and meet only
  ``offset-slice``).
  Real text: ``Could not find a host dimension matching stick expr``.
- ``offset-slice``: ``slice``/``split``/``select``/``unbind`` of the last dim at an offset
  that is not a multiple of 64. Real text: ``non-zero offset assertion in stickify``.
- ``rank-4d``: a tensor argument, or the target shape of ``view``/``expand``/``unsqueeze``, of
  more than 3 dims.
- ``zero-length``: a tensor argument with zero elements (also checked on host->device copies).
- ``core-span``: a matmul weight whose stick count splits over the 32 cores only into
  per-core spans above 256 MB (an LM head with a vocab of many sticks with a large prime
  factor).

Where a view starts in the rows of its buffer (the views the ``offset-view-input`` miscompile
reads from the row start): :func:`offset_in_row` and :func:`row_pitch`, for adapters that
recognise the same views.
"""

from __future__ import annotations

# The rule modules register their rules on import, and rules are tried in registration order
# (the first broken one decides): the layout rules first, then the capability rules.
from spyre_sim import _layout_rules  # noqa: F401

# isort: split
from spyre_sim._capability_rules import TOPK_PER_CORE as TOPK_PER_CORE
from spyre_sim._capability_rules import topk_split as topk_split
from spyre_sim._layout_registry import (
    CORE_COUNT,
    CORE_SPAN_BYTES,
    STICK_BYTES,
    LayoutRule,
    active_rules,
    layout_rule,
    rules,
    stick_elements,
)
from spyre_sim._rows import offset_in_row, row_pitch

__all__ = [
    "CORE_COUNT",
    "CORE_SPAN_BYTES",
    "STICK_BYTES",
    "LayoutRule",
    "active_rules",
    "layout_rule",
    "offset_in_row",
    "row_pitch",
    "rules",
    "stick_elements",
]
