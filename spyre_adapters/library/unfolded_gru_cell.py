"""``nn.GRUCell`` computed from ordinary torch calls where the other adapters see it: the
``unfolded-gru-cell`` adapter.

``torch.nn.GRUCell.forward`` (SLANet's and SLANeXt's table-structure decoders, and any
model's GRU cell) checks its arguments in Python and hands the step to ``torch._VF.gru_cell``,
which decomposes it in C++: on the CPU into two ``linear`` calls and pointwise ops, on any
other device into those matmuls plus ``aten._thnn_fused_gru_cell``. None of those calls passes
through a torch-function mode, so the adapters that make matmuls lowerable never see them:
SLANet's cell (input 17, hidden 16) stops at ``mm [1, 17] @ [17, 48]`` (gap ``stick-align``)
although ``stick-align-padding`` is applied, and with the layout checks off at
``_thnn_fused_gru_cell``, which no stack lowers.

Every matched cell gets a bound forward: ``nn.GRUCell.forward``'s own code (argument checks,
unbatched input, a zero initial state), in which the name ``_VF`` is rebound
(:mod:`spyre_adapters.library._global_rebinding`) so that its ``gru_cell`` call computes the
step in Python from the weights that forward passes (the module's own parameters, read at
call time), in the order of operations of PyTorch's CPU cell::

    i_r, i_z, i_n = linear(x, W_ih, b_ih).chunk(3, 1)
    h_r, h_z, h_n = linear(h, W_hh, b_hh).chunk(3, 1)
    r  = sigmoid(h_r + i_r)
    z  = sigmoid(h_z + i_z)
    n  = tanh(i_n + h_n * r)
    h' = (h - n) * z + n

with the same operations and operands; on the CPU the result is the stock one to float32
rounding (PyTorch's cell updates its gate thirds in place, as strided views, where the
vectorised ``sigmoid`` can differ from the contiguous one by an ulp). Both matmuls are ``F.linear`` calls
issued inside the model's forward, which ``stick-align-padding`` pads like any other; the gate
thirds are cuts of the stick dim (never halves, so never ``sub-stick-head``), as the LSTM's
quarters are in ``unfolded-lstm``.

Matched structurally, in any family: every ``nn.GRUCell`` running the stock forward (not
already bound per instance, not overridden by a subclass).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import _VF, nn
from torch.nn.modules import rnn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import rebind_globals
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["UnfoldedGruCell", "adapter", "gru_cell", "unfoldable"]


def gru_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
) -> torch.Tensor:
    """One GRU step of ``x`` [B, I] from ``h`` [B, H], as PyTorch's CPU cell computes it."""
    i_r, i_z, i_n = nn.functional.linear(x, w_ih, b_ih).chunk(3, 1)
    h_r, h_z, h_n = nn.functional.linear(h, w_hh, b_hh).chunk(3, 1)
    reset = torch.sigmoid(h_r + i_r)
    update = torch.sigmoid(h_z + i_z)
    new = torch.tanh(i_n + h_n * reset)
    return (h - new) * update + new


class _VFUnfolded:
    """``torch._VF`` as ``nn.GRUCell.forward`` sees it once adapted: ``gru_cell`` is
    :func:`gru_cell`, every other name is ``torch._VF``'s."""

    gru_cell = staticmethod(gru_cell)

    def __getattr__(self, name: str) -> Any:
        return getattr(_VF, name)


#: ``nn.GRUCell.forward``'s own code, with its ``_VF.gru_cell`` computed in Python.
_FORWARD = rebind_globals(
    nn.GRUCell.forward,  # type: ignore[arg-type]
    vars(rnn),
    {"_VF": _VFUnfolded()},
)


def unfoldable(module: nn.Module) -> bool:
    """Whether ``module`` is a GRU cell this adapter computes: an ``nn.GRUCell`` running the
    stock forward (not already bound by an adapter, not overridden by a subclass)."""
    return (
        isinstance(module, nn.GRUCell)
        and "forward" not in module.__dict__
        and type(module).forward is nn.GRUCell.forward
    )


class UnfoldedGruCell(TargetedAdapter[nn.Module]):
    """The ``unfolded-gru-cell`` adapter, version 1.0 (see the module docstring)."""

    name = "unfolded-gru-cell"
    missing = "no nn.GRUCell running the stock forward"

    def targets(self, model: nn.Module) -> list[nn.Module]:
        return [module for module in model.modules() if unfoldable(module)]

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[nn.Module]) -> None:
        for module in targets:
            edit.bind_forward(module, _FORWARD)


adapter = UnfoldedGruCell()
