"""Op bridges, second form: the same candidates, computed where the device refuses the op.

An :class:`OpBridge` of :mod:`spyre_adapters.library.op_bridge` (the first form) runs a model's
forwards under a ``TorchDispatchMode`` that sees every op of the forward, to catch the few
calls the release refuses: one Python call per op (and PyTorch's own wrapper around it) for a
handful of bridged calls. This form installs the same candidates as refusal handlers of the
device (:mod:`spyre_sim.refusals`) for the duration of each forward instead: the device calls
an op's candidate exactly when the release refuses that op (a lowering error for that op that
is not a layout rule), with the call's own arguments, and ops it never refuses pay nothing.

What a bridged call computes is the first form's, candidate for candidate (the candidates are
that module's: :func:`~spyre_adapters.library.op_bridge.candidate`): a call the release lowers
runs as it would without the bridge; a transfer (``x.to("cpu")``) is never bridged; a candidate
that has no form for the arguments (``NotImplementedError``) leaves the call refused with the
release's own error; the observers of :func:`~spyre_adapters.library.op_bridge.observe` see
each bridged call. One difference, in the bridge's favour: a composite op the device runs
through its decomposition is bridged inside it too (the first form's mode is not running while
the op it handed on runs).

The handlers are a scoped mode of kind ``op-bridge-refusals``
(:mod:`spyre_adapters.library._scoped_modes`), so ``restore`` takes them back with the rest of
the edit; the table of every bridge on a model is built once per set of settings, and
:meth:`OpBridge.apply_together` marks a model once for all the bridges ``prepare`` applies to it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch._ops import OpOverload

from spyre_adapters.contract import ModelEdit
from spyre_adapters.library import op_bridge
from spyre_adapters.library._scoped_modes import enable, register_kind

__all__ = ["KIND", "OpBridge"]

KIND = "op-bridge-refusals"


def _handler(impl: op_bridge.Impl) -> Any:
    def handle(
        func: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: Exception
    ) -> Any:
        if op_bridge._moves(args, kwargs):
            raise refusal  # a transfer lands where it is asked, or not at all
        for observer in list(op_bridge._observers):
            observer(func, args, kwargs)
        try:
            return impl(func, args, kwargs)
        except NotImplementedError:
            # no form for these arguments (a rewrite of some exponents only): still refused
            raise refusal from None

    return handle


@functools.cache
def _handlers(settings: frozenset[tuple[str, str]]) -> Mapping[OpOverload, Any]:
    table = {}
    for name, how in sorted(settings):
        op = op_bridge.resolve_op(name)
        table[op] = _handler(op_bridge.candidate(op, how))
    return table


def _factory(settings: frozenset[tuple[str, str]]) -> AbstractContextManager[None]:
    from spyre_sim.refusals import handling

    return handling(_handlers(settings))


register_kind(KIND, _factory)


class OpBridge(op_bridge.OpBridge):
    """An adapter bridging the ops of ``table`` (``{"aten.isinf.default": "decomposition"}``)
    with their candidates, where the device refuses them; every op and candidate is checked
    when the adapter is built (as for the first form, whose table, ``matches`` and ``repr``
    it shares)."""

    def apply(self, model: torch.nn.Module, edit: ModelEdit) -> None:
        enable(model, edit, KIND, frozenset(self.table.items()))

    @staticmethod
    def apply_together(
        adapters: Sequence[OpBridge], model: torch.nn.Module, edit: ModelEdit
    ) -> None:
        """Apply several bridges at once: the model is marked once with all their ops, as
        applying each in turn marks it (``prepare`` applies a model's run of bridges so; a
        model meets some thirty of them at a release)."""
        settings = frozenset(item for adapter in adapters for item in adapter.table.items())
        enable(model, edit, KIND, settings)
