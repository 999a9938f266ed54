"""Cuts at an offset and picks of a packed buffer, with infinities and NaN kept where the stock
op keeps them: the ``fused-projection-split`` adapter, 2.2.

2.1 (:mod:`spyre_adapters.library.packed_picks`) computes a cut of the last dim at an offset
(while the release refuses or misreads it) as a 0/1 selection matmul, in the first generation's
``stick-layout`` mode, and a pick of a packed buffer that starts inside its rows as a one-hot
matmul. Both multiply every other element of the row by 0, so one infinity or NaN there made
the result NaN. 2.2 enables the same features in ``stick-layout-exact``
(:mod:`spyre_adapters.library._stick_layout_exact`), the mode ``head-padding`` 2.8.0 and
``stick-align-padding`` 2.4 use, so a model adapted by the three runs under one mode as with
2.1, 2.7.0 and 2.3; and it computes the picks with the exact product of
:mod:`spyre_adapters.library._exact_selection`, in a mode of kind ``packed-picks-exact``: 2.1's
mode, whose ``pick`` is 2.1's code calling that product. On finite inputs every result is 2.1's,
bit for bit. Matching is 2.1's.
"""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import _stick_layout_exact, packed_picks
from spyre_adapters.library._exact_selection import rebound, selection_matmul
from spyre_adapters.library._scoped_modes import enable as enable_kind
from spyre_adapters.library._scoped_modes import register_kind

__all__ = ["KIND", "ExactPackedPicks", "ExactPackedPicksMode", "adapter", "pick"]

KIND = "packed-picks-exact"

#: ``x.select(dim, at)`` as a one-hot matmul along ``dim`` (2.1's), every element exact
pick = rebound(packed_picks.pick, {"padded_matmul": selection_matmul})


class ExactPackedPicksMode(packed_picks.PackedPicksMode):
    """2.1's mode, computing each pick with the exact :data:`pick`."""

    __torch_function__ = rebound(packed_picks.PackedPicksMode.__torch_function__, {"pick": pick})


#: 2.1's factory: the mode where the release misreads views that start inside a row, else none
_factory = rebound(packed_picks._factory, {"PackedPicksMode": ExactPackedPicksMode})
register_kind(KIND, _factory)


class ExactPackedPicks(packed_picks.PackedPicks):
    """The ``fused-projection-split`` 2.2 adapter (see the module docstring)."""

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        _stick_layout_exact.enable(model, edit, "offset-slice")
        _stick_layout_exact.enable(model, edit, "offset-view-input")
        enable_kind(model, edit, KIND, frozenset())


adapter = ExactPackedPicks()
