"""``host-one-hot`` 1.1.0: 1.0.0, also where a forward reaches ``one_hot`` through a
module-level helper function.

1.0.0 (:mod:`spyre_adapters.library.host_one_hot`) selects the forwards of modules whose own
class calls ``one_hot``. LongT5's transient-global attention calls it in a function of its
module (``_create_global_aggregates``, called from the forward), so 1.0.0 matched nothing there
and the model stopped at ``int64-storage``. 1.1.0 also selects a forward that names a function
of its module's globals that calls ``one_hot``, itself or through such functions, up to
:data:`DEPTH` calls deep. The mode and everything else are 1.0.0's.
"""

from __future__ import annotations

import types

from torch import nn

from spyre_adapters.library._global_rebinding import code_mentions
from spyre_adapters.library._mode_scoped_forward import ForwardSelector
from spyre_adapters.library.host_one_hot import _NAME, HostOneHot, _class_calls

__all__ = ["DEPTH", "HostOneHotHelpers", "adapter", "reaches_one_hot"]

#: How many calls of module-level functions deep a forward is followed.
DEPTH = 3


def reaches_one_hot(fn: types.FunctionType, depth: int = DEPTH) -> bool:
    """``fn`` calls ``one_hot``, itself or through the functions of its globals it names."""
    seen: set[types.CodeType] = set()
    pending = [(fn, 0)]
    while pending:
        current, level = pending.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        if code_mentions(current, _NAME):
            return True
        if level < depth:
            for name in current.__code__.co_names:
                callee = current.__globals__.get(name)
                if isinstance(callee, types.FunctionType):
                    pending.append((callee, level + 1))
    return False


class HostOneHotHelpers(HostOneHot):
    """``host-one-hot`` 1.1.0 (see the module docstring)."""

    def selects(self, model: nn.Module) -> ForwardSelector:
        return lambda module, fn: reaches_one_hot(fn) or _class_calls(module)


adapter = HostOneHotHelpers()
