"""Handlers for ops the release refuses: the hook an op bridge computes a refused call through.

A real stack that cannot lower an op stops the compile; a team then computes that op another
way (a decomposition into ops the stack lowers, or the host). :func:`handling` installs such
handlers on the device for the duration of a block: when a call of a handled op is refused by
the release itself -- a :class:`~spyre_sim.errors.SpyreLoweringError` for *that* op that is not
a layout rule (no other form of an op changes the shapes it is given) -- the device calls the
op's handler with the call's own (device) arguments and the refusal, and the handler's result
is the call's result. The refusal is counted in telemetry as it is without a handler (gap and
error by module path): the release did refuse the op. Every other call of the op, and every op
without a handler, runs as it would without one, so a block of handlers costs the ops it never
catches one dictionary lookup each, and nothing when no handler is installed::

    def by_decomposition(op, args, kwargs, refusal):
        return decomposition_table[op](*args, **kwargs)

    with spyre_sim.refusals.handling({torch.ops.aten.isinf.default: by_decomposition}):
        model(input_ids)

A handler may decline a call by raising the refusal it was given. While a handler runs, its own
op is not handled again (a decomposition may issue the op it decomposes, on other arguments);
the other handlers stay installed, so a decomposition whose ops are refused in turn is
computed by their handlers. Blocks nest: an inner block's handler for an op is asked first
until the inner block ends, and a call it declines goes to the handler of the block around it
(two adapters may each compute some calls of one op: a rewrite of some exponents of ``pow``,
and a cast of an integer base). ``device_state.reset()`` removes every handler.

Handlers see the op before any harness rule: an op run in the harness (:mod:`spyre_sim.scope`)
is never refused, so never handled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from spyre_sim.state import device_state

if TYPE_CHECKING:
    from torch._ops import OpOverload

    from spyre_sim.errors import SpyreLoweringError

__all__ = ["Handler", "active", "handling"]

#: ``handler(op, args, kwargs, refusal)`` -> the call's result (or raise ``refusal``).
Handler = Callable[["OpOverload", Sequence[Any], Mapping[str, Any], "SpyreLoweringError"], Any]


@contextmanager
def handling(handlers: Mapping[OpOverload, Handler]) -> Iterator[None]:
    """Install ``handlers`` (op -> :data:`Handler`) for the block (see the module docstring)."""
    installed = device_state.refusal_handlers
    replaced = {op: installed[op] for op in handlers if op in installed}
    mine = {
        op: _first_then(handler, replaced[op]) if op in replaced else handler
        for op, handler in handlers.items()
    }
    installed.update(mine)
    try:
        yield
    finally:
        for op, handler in mine.items():
            if installed.get(op) is handler:
                del installed[op]
        installed.update(replaced)


def _first_then(inner: Handler, outer: Handler) -> Handler:
    """``inner``, and ``outer`` for the calls ``inner`` declines (raises the refusal it got)."""

    def handle(
        op: OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any], refusal: SpyreLoweringError
    ) -> Any:
        try:
            return inner(op, args, kwargs, refusal)
        except BaseException as error:
            if error is not refusal:
                raise
        return outer(op, args, kwargs, refusal)

    return handle


def active() -> Mapping[OpOverload, Handler]:
    """The handlers installed now (op -> handler), as a copy."""
    return dict(device_state.refusal_handlers)


def call(
    op: OpOverload,
    run: Callable[[], Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    name: str,
) -> Any:
    """``run()`` (the call of ``op`` on the device); when the release refuses it, the result of
    ``op``'s handler instead. ``name``: the op's ``aten.x.overload`` name (the refusal's op)."""
    from spyre_sim.errors import SpyreLayoutError, SpyreLoweringError

    installed = device_state.refusal_handlers
    try:
        return run()
    except SpyreLoweringError as error:
        if isinstance(error, SpyreLayoutError) or error.op != name:
            raise
        handler = installed.get(op)
        if handler is None:
            raise
        refusal = error
    del installed[op]  # its own op is not handled again while the handler runs
    try:
        return handler(op, args, kwargs, refusal)
    finally:
        installed.setdefault(op, handler)
