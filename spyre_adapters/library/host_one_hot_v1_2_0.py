"""``host-one-hot`` 1.2.0: 1.1.0, also where the forward reaching ``one_hot`` through a helper
function of its module is decorated.

1.1.0 (:mod:`spyre_adapters.library.host_one_hot_v1_1_0`) follows the names a forward's code
loads to the functions of its module, but reads them from the outermost function only.
Transformers decorates the forwards of its models (``@can_return_tuple``, ``@auto_docstring``):
the outermost function is then the decorator's wrapper, which lives in another module and names
none of the model's helpers. The MoE language models whose auxiliary loss
(``load_balancing_loss_func``, called from ``<X>ForCausalLM.forward`` when
``output_router_logits`` is set) builds its expert mask with ``one_hot`` were therefore not
selected (OLMoE, Qwen3-MoE, Mixtral, Qwen2-MoE, Jamba, ERNIE 4.5 MoE, ...), and the loss
stopped at ``int64-storage``. 1.2.0 starts 1.1.0's walk from every function of the forward's
decorator chain (the functions a wrapper closes over), each with its own globals; a decorator
step is not a call, so :data:`DEPTH` counts helper calls as before. The mode and everything
else are 1.1.0's.
"""

from __future__ import annotations

import types

from torch import nn

from spyre_adapters.library import host_one_hot_v1_1_0 as v1_1_0
from spyre_adapters.library._global_rebinding import _chain
from spyre_adapters.library._mode_scoped_forward import ForwardSelector
from spyre_adapters.library.host_one_hot import HostOneHot, _class_calls

__all__ = ["DEPTH", "HostOneHotDecorated", "adapter", "reaches_one_hot"]

#: How many calls of module-level functions deep a forward is followed.
DEPTH = 3


def reaches_one_hot(fn: types.FunctionType, depth: int = DEPTH) -> bool:
    """A function of ``fn``'s decorator chain calls ``one_hot``, itself or through the functions
    of its globals it names, up to ``depth`` calls deep (1.1.0's walk from each of them)."""
    return any(v1_1_0.reaches_one_hot(current, depth) for current in _chain(fn))


class HostOneHotDecorated(HostOneHot):
    """``host-one-hot`` 1.2.0 (see the module docstring)."""

    def selects(self, model: nn.Module) -> ForwardSelector:
        return lambda module, fn: reaches_one_hot(fn) or _class_calls(module)


adapter = HostOneHotDecorated()
