"""``nn.LSTM`` computed step by step from ordinary torch calls where the other adapters see it:
the ``unfolded-lstm`` adapter.

``torch.nn.LSTM.forward`` (EnCodec's ``EncodecLSTM``, and any model's LSTM) checks its
arguments in Python and then hands the whole recurrence to ``torch._VF.lstm``, which
decomposes it in C++: on the CPU into ``addmm``/``mm`` over the 4H-wide gate matrix, on any
other device into those matmuls plus ``aten._thnn_fused_lstm_cell``. None of those calls passes
through a torch-function mode, so the adapters that make matmuls lowerable never see them: an
EnCodec of hidden size 32 stops at the LSTM's ``mm [12, 32] @ [32, 128]`` (gap
``stick-align``) although ``stick-align-padding`` is applied, and with the layout checks off
at ``_thnn_fused_lstm_cell``, which no stack lowers.

Every matched LSTM gets a bound forward: ``nn.LSTM.forward``'s own code (argument checks,
``batch_first``, unbatched input, zero initial states), in which the name ``_VF`` is rebound
(:mod:`spyre_adapters.library._global_rebinding`) so that its ``lstm`` call runs the
recurrence in Python from the weights that forward passes (the module's own parameters, read
at call time: ``load_state_dict`` and ``.to()`` keep working). Per layer and direction, the
code of PyTorch's CPU LSTM cell, in its order of operations::

    projected = linear(x, W_ih, b_ih)                      # every time step at once
    gates     = linear(h_{t-1}, W_hh, b_hh) + projected[t]
    i, f, g, o = gates.chunk(4, 1)                         # quarters of the 4H gate dim
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    c_t = f * c_{t-1} + i * g
    h_t = o * tanh(c_t)

The reverse direction runs t = T-1 .. 0; the directions' outputs are concatenated on the last
dim and feed the next layer; ``(output, h_n, c_n)`` has the stock shapes, dtypes and layout (a
``batch_first`` output is the same transposed view). With oneDNN off, PyTorch's native CPU
LSTM computes exactly this, bit for bit; the default oneDNN kernel differs from it by float32
rounding. Both matmuls are ``F.linear`` calls issued inside the model's forward, which
``stick-align-padding`` pads like any other (one padded copy of each weight, kept while it is
unchanged). The gate quarters are cuts of the stick dim, not halves (never ``sub-stick-head``):
stacks from 2026.06 lower them, and before that, and while offset views are misread (until
2026.09), ``fused-projection-split`` computes them as selection matmuls, as for any fused
projection. (One projection per gate, by weight rows, would avoid the cut of the gates but
still cut the biases at the same offsets, and takes 33 device ops per step instead of 15.)

Matched structurally, in any family: every ``nn.LSTM`` (or subclass that keeps its forward)
without ``proj_size``. Left stock: LSTMs with ``proj_size > 0`` (not matched); at call time, a
``PackedSequence`` input and inter-layer dropout while training (``dropout > 0``,
``num_layers > 1``, ``training``) go to the stock ``_VF.lstm`` unchanged. An LSTM whose
forward is already bound per instance (by another adapter, or by accelerate's hooks when a
model is loaded with a ``device_map``) is not matched either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import _VF, nn
from torch.nn.modules import rnn

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library._global_rebinding import rebind_globals
from spyre_adapters.library._targeted_adapter import TargetedAdapter

__all__ = ["UnfoldedLstm", "adapter", "unfolded_lstm", "unfoldable"]

_GATES = 4  # i, f, g, o: the quarters of the gate matrix, in that order


def _direction(
    x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weights: Sequence[torch.Tensor],
    has_biases: bool,
    reverse: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One direction of one layer over ``x`` [T, B, I] from ``(h, c)`` [B, H]: the outputs
    [T, B, H] and the final ``(h, c)``."""
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    # the input projection of every step at once, as PyTorch's CPU LSTM computes it
    projected = nn.functional.linear(x, w_ih, b_ih)
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outputs: list[torch.Tensor] = [h] * x.shape[0]
    for t in steps:
        gates = nn.functional.linear(h, w_hh, b_hh) + projected[t]
        ingate, forgetgate, cellgate, outgate = gates.chunk(_GATES, 1)
        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)
        c = forgetgate * c + ingate * cellgate
        h = outgate * torch.tanh(c)
        outputs[t] = h
    return torch.stack(outputs, 0), h, c


def unfolded_lstm(*args: Any, **kwargs: Any) -> Any:
    """``torch._VF.lstm`` computed step by step (see the module docstring); the calls it does
    not compute (packed sequences, projections, inter-layer dropout while training) go to
    ``torch._VF.lstm`` itself."""
    if kwargs or len(args) != 9 or not isinstance(args[1], (tuple, list)):
        return _VF.lstm(*args, **kwargs)  # the PackedSequence form: (data, batch_sizes, ...)
    input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
    h0, c0 = hx
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    dropping = bool(train) and float(dropout) > 0 and int(num_layers) > 1
    if dropping or h0.shape[-1] != c0.shape[-1] or len(params) != num_layers * directions * per:
        return _VF.lstm(*args)
    x = input.transpose(0, 1) if batch_first else input
    if x.shape[0] == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    h_n: list[torch.Tensor] = []
    c_n: list[torch.Tensor] = []
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            index = layer * directions + d
            weights = params[index * per : (index + 1) * per]
            out, h, c = _direction(x, h0[index], c0[index], weights, has_biases, d == 1)
            outputs.append(out)
            h_n.append(h)
            c_n.append(c)
        x = outputs[0] if directions == 1 else torch.cat(outputs, -1)
    output = x.transpose(0, 1) if batch_first else x
    return output, torch.stack(h_n, 0), torch.stack(c_n, 0)


class _VFUnfolded:
    """``torch._VF`` as ``nn.LSTM.forward`` sees it once adapted: ``lstm`` is
    :func:`unfolded_lstm`, every other name is ``torch._VF``'s."""

    lstm = staticmethod(unfolded_lstm)

    def __getattr__(self, name: str) -> Any:
        return getattr(_VF, name)


#: ``nn.LSTM.forward``'s own code, with its ``_VF.lstm`` computed step by step.
_FORWARD = rebind_globals(
    nn.LSTM.forward,  # type: ignore[arg-type]
    vars(rnn),
    {"_VF": _VFUnfolded()},
)


def unfoldable(module: nn.Module) -> bool:
    """Whether ``module`` is an LSTM this adapter computes: an ``nn.LSTM`` running the stock
    forward (not already bound by an adapter, not overridden by a subclass), without
    ``proj_size``."""
    return (
        isinstance(module, nn.LSTM)
        and module.mode == "LSTM"
        and module.proj_size == 0
        and "forward" not in module.__dict__
        and type(module).forward is nn.LSTM.forward
    )


class UnfoldedLstm(TargetedAdapter[nn.Module]):
    """The ``unfolded-lstm`` adapter, version 1.0 (see the module docstring)."""

    name = "unfolded-lstm"
    missing = "no nn.LSTM without proj_size running the stock forward"

    def targets(self, model: nn.Module) -> list[nn.Module]:
        return [module for module in model.modules() if unfoldable(module)]

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[nn.Module]) -> None:
        for module in targets:
            edit.bind_forward(module, _FORWARD)


adapter = UnfoldedLstm()
