"""The facts about one ATen OpOverload the hot path needs, built once per overload.

:class:`OpInfo` holds an overload's names (packet, overload, qualified name), which returns are
fresh, views or inputs written in place (and which ``out=`` arguments), the special-op handler
(:mod:`spyre_sim._special_ops`) or host kernel (:mod:`spyre_sim._host_kernels`) registered for
it, whether its results are rounded to DL16, which index arguments are widened to int64, and
the verdict cache that :mod:`spyre_sim._dispatch` fills.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch._ops import OpOverload

from spyre_sim import (
    _host_kernels,
    _nan_made,
    _selection_ties,
    _special_ops,
    _storage,
    _wide_arithmetic,
)

if TYPE_CHECKING:
    from spyre_sim._lowering import Verdict

_INDEX_ARGUMENTS = frozenset({"index", "indices", "target"})


class OpInfo:
    """Facts about one OpOverload, built once."""

    __slots__ = (
        "cache",
        "call",
        "dropout",
        "fresh",
        "is_view",
        "makes_nan",
        "mutated",
        "name",
        "out_args",
        "overload",
        "packet",
        "qualname",
        "rounds",
        "shape_gen",
        "special",
        "uses_args",
        "verdict",
        "verdict_gen",
        "watch",
        "wide",
        "wide_index",
    )

    def __init__(self, func: OpOverload) -> None:
        schema = func._schema
        self.packet = (
            "aten." + func._overloadpacket.__name__
            if func.namespace == "aten"
            else (f"{func.namespace}.{func._overloadpacket.__name__}")
        )
        self.overload = func._overloadname
        self.name = f"{self.packet}.{self.overload}"
        self.is_view = bool(func.is_view)
        self.call: Callable[..., Any] = func._op
        self.qualname = (
            f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
        )
        # returns: index of the input they alias and write (in-place/out=), or -1 if fresh,
        # or -2 if a view of an input (never rounded: rounding a view breaks aliasing)
        fresh: list[int] = []
        for ret in schema.returns:
            info = ret.alias_info
            if info is None:
                fresh.append(-1)
            elif info.is_write:
                idx = -2
                for i, a in enumerate(schema.arguments):
                    if (
                        a.alias_info is not None
                        and a.alias_info.is_write
                        and set(a.alias_info.before_set) == set(info.before_set)
                    ):
                        idx = i
                        break
                fresh.append(idx)
            else:
                fresh.append(-2)
        self.fresh = tuple(fresh)
        self.out_args = tuple(
            (i, a.name)
            for i, a in enumerate(schema.arguments)
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
        )
        self.mutated = tuple(
            i
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        )
        #: the handler of a special op (a transfer, a scalar read), or ``None``
        self.special = _special_ops.handler(self.packet)
        preserving = _storage.VALUE_PRESERVING
        self.rounds = self.name not in preserving and self.packet not in preserving
        kernel = _host_kernels.kernel(self.name)
        if kernel is not None:
            self.call = kernel.call
            self.rounds = not kernel.rounds_itself
        #: ``(position, name)`` of the ``dropout_p`` argument of an op whose only random draw
        #: is that dropout (attention), or None
        self.dropout = _wide_arithmetic.dropout_argument(func)
        #: the dtype fp16 operands are computed in (one DL16 rounding of the result), or None
        self.wide = _wide_arithmetic.width(self, func)
        #: the check of a selection decided within one DL16 step (:mod:`_selection_ties`), or None
        self.watch = _selection_ties.watcher(self.name)
        #: whether the result can hold NaN its operands do not (:mod:`_nan_made`)
        self.makes_nan = self.packet in _nan_made.NAN_MAKERS
        self.cache: dict[Any, Verdict] = {}
        self.verdict: Verdict | None = None
        self.verdict_gen: Any = None
        self.shape_gen: Any = None
        self.uses_args = False
        # positions of index arguments: the device stores int64 as int32, and host kernels such
        # as gather, scatter and index_copy_ insist on int64 indices (a value-preserving cast)
        self.wide_index = tuple(
            i
            for i, a in enumerate(schema.arguments)
            if a.name in _INDEX_ARGUMENTS
            and str(a.type) in ("Tensor", "Optional[Tensor]", "List[Optional[Tensor]]")
        )

    def output_how(self, i: int) -> int:
        """How return ``i`` relates to the inputs, an entry of :attr:`fresh`: a ``Tensor[]``
        return (one annotation: ``split``, ``unbind``) gives every item that one; a return the
        schema does not annotate is fresh."""
        fresh = self.fresh
        if len(fresh) == 1:
            return fresh[0]
        return fresh[i] if i < len(fresh) else -1

    def writes_output(self, i: int) -> bool:
        """Whether the op writes return ``i`` (fresh, or an input written in place), not a view
        of an input."""
        return self.output_how(i) != -2
