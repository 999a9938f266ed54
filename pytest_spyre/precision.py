"""Closeness checks that fail in a test, with what they measured: the evidence of a precision
failure.

While a ``--spyre`` run is active, the closeness checks test suites use are wrapped:
``torch.allclose`` / ``Tensor.allclose``, ``torch.testing.assert_close`` and NumPy's
``allclose`` / ``testing.assert_allclose``, and the written-out form ``max_diff =
np.amax(np.abs(a - b)); self.assertLessEqual(max_diff, 1e-5)`` (unittest's ``assertLessEqual``
and ``assertLess`` when their first operand is a non-negative floating scalar and the bound a
tolerance, below 1), and a bound on a cosine similarity checked with ``assertTrue``
(``self.assertTrue(1 - F.cosine_similarity(a, b, dim=0).max() <= 1e-3)``: the last
similarity the test computed is kept, unmeasured, and a failing ``assertTrue`` of a false flag records
``1 - cos``, there being nothing else to measure), and a bound written inline in an ``assertTrue``
(``self.assertTrue(abs(ppl.item() - 141.4291) < 1e-3)``: the failed call's source is read and,
when its operands are plain reads of the test's variables, the difference is measured again;
see :func:`_inline_bound`). Each behaves exactly as before (same result, same exception); when one
finds its operands not close, :class:`ClosenessLog` records the check, the largest absolute and
relative difference (a bound check knows only the difference it was given), the tolerances,
NaN counts and the shape. A test
that then fails for a reason other than a device error is a *precision* failure
(:mod:`pytest_spyre.classify`), reported with those numbers and the device's number format.

Operands of different shapes are not a precision question and are not recorded.
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
import sys
import textwrap
import unittest
from types import FrameType
from typing import Any

import torch

import spyre_sim.limits

__all__ = ["ClosenessLog", "tolerance_note"]


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        return None


def _measure(check: str, actual: Any, expected: Any, rtol: Any, atol: Any) -> dict[str, Any] | None:
    a, b = _as_tensor(actual), _as_tensor(expected)
    if a is None or b is None or a.shape != b.shape or a.numel() == 0:
        return None
    if a.is_complex() or b.is_complex() or not (a.is_floating_point() or b.is_floating_point()):
        return None
    x, y = a.to(torch.float64), b.to(torch.float64)
    nan = int((torch.isnan(x) | torch.isnan(y)).sum())
    finite = torch.isfinite(x) & torch.isfinite(y)
    diff = (x - y).abs()
    abs_diff = float(diff[finite].max()) if bool(finite.any()) else math.nan
    denominator = y.abs()
    relative = diff[finite & (denominator > 0)] / denominator[finite & (denominator > 0)]
    rel_diff = float(relative.max()) if relative.numel() else 0.0
    measured: dict[str, Any] = {
        "check": check,
        "max_abs_diff": abs_diff,
        "max_rel_diff": rel_diff,
        "atol": None if atol is None else float(atol),
        "rtol": None if rtol is None else float(rtol),
        "nan": nan,
        "shape": list(a.shape),
        "dtype": str(a.dtype).replace("torch.", ""),
    }
    reached = spyre_sim.limits.reached([actual, expected])
    if reached is not None:
        # an emulator limit was met in this test: whether it may have reached these values
        measured["limits_reached"] = reached
    return measured


def _scalar(value: Any, integers: bool = False) -> float | None:
    """The value of a floating scalar (Python, NumPy or a one-element tensor), else None; an
    integer (not a bool) too when ``integers``."""
    if isinstance(value, numbers.Integral):  # bool among them
        return float(value) if integers and not isinstance(value, bool) else None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor) or hasattr(value, "dtype"):
        tensor = _as_tensor(value)
        if tensor is not None and tensor.numel() == 1 and tensor.is_floating_point():
            return float(tensor.reshape(()))
    return None


def _similarity(result: Any) -> dict[str, Any] | None:
    """What a ``cosine_similarity`` result says: ``1 - cos`` at its least similar entry."""
    tensor = _as_tensor(result)
    if tensor is None or tensor.numel() == 0 or not tensor.is_floating_point():
        return None
    least = float(tensor.to(torch.float64).min())
    return {
        "check": "cosine similarity bound (assertTrue), measured as 1 - cos",
        "max_abs_diff": 1.0 - least,
        "atol": None,
        "rtol": None,
        "nan": int(torch.isnan(tensor).sum()),
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
    }


def _false_flag(value: Any) -> bool:
    """A false bool, NumPy bool or one-element bool tensor (what a failed bound gives)."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and value.dtype is torch.bool and not bool(value)
    return value is False or (type(value).__name__ == "bool_" and not bool(value))


def _measure_bound(check: str, difference: Any, bound: Any) -> dict[str, Any] | None:
    """A failed ``difference <= bound`` check, when it is a tolerance check: a non-negative
    floating difference (NaN included) against a numeric bound in [0, 1)."""
    value, limit = _scalar(difference), _scalar(bound, integers=True)
    if value is None or limit is None or not 0 <= limit < 1 or value < 0:
        return None
    dtype = getattr(difference, "dtype", None)
    return {
        "check": check,
        "max_abs_diff": value,
        "atol": limit,
        "rtol": None,
        "nan": int(math.isnan(value)),
        "shape": [],
        "dtype": str(dtype).replace("torch.", "") if dtype is not None else "float",
    }


#: Calls an inline bound's operands may make when measured again: reads, no side effects.
_READS = frozenset({"item", "float", "abs", "cpu", "detach", "max", "min", "sum", "mean"})


def _plain(node: ast.AST) -> bool:
    """Whether evaluating ``node`` again only reads: names, attributes, constants, constant
    subscripts, arithmetic, and the calls of :data:`_READS` (``x.item()``, ``abs(x)``)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _plain(node.value)
    if isinstance(node, ast.Subscript):
        return _plain(node.value) and isinstance(node.slice, ast.Constant)
    if isinstance(node, ast.UnaryOp):
        return _plain(node.operand)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)) and _plain(
            node.left
        ) and _plain(node.right)  # fmt: skip
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        named = isinstance(func, ast.Name) and func.id in ("abs", "float")
        method = isinstance(func, ast.Attribute) and func.attr in _READS and _plain(func.value)
        return (named or method) and all(_plain(a) for a in node.args)
    return False


def _difference(node: ast.expr) -> ast.expr | None:
    """``node`` itself when it is ``abs(a - b)`` or ``(a - b).abs()``, else None."""
    if isinstance(node, ast.Call) and not node.keywords:
        if isinstance(node.func, ast.Name) and node.func.id == "abs" and len(node.args) == 1:
            inner = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "abs" and not node.args:
            inner = node.func.value
        else:
            return None
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
            return node
    return None


def _inline_bound(frame: FrameType) -> dict[str, Any] | None:
    """A failed ``assertTrue(abs(a - b) < tol)`` (or ``<=``) made in ``frame``: its source is
    found from the frame's code and line, and ``abs(a - b)`` and ``tol`` are evaluated again in
    the frame when every part of them only reads (:func:`_plain`); else None."""
    try:
        lines, first = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    line = frame.f_lineno - max(first, 1) + 1
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "assertTrue"
            and node.args
            and node.lineno <= line <= (node.end_lineno or node.lineno)
        ):
            continue
        test = node.args[0]
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Lt, ast.LtE))):  # fmt: skip
            return None
        difference, bound = _difference(test.left), test.comparators[0]
        if difference is None or not _plain(difference) or not _plain(bound):
            return None
        scope = dict(frame.f_locals)
        try:
            value = eval(compile(ast.Expression(difference), "<bound>", "eval"),
                         frame.f_globals, scope)  # fmt: skip
            limit = eval(compile(ast.Expression(bound), "<bound>", "eval"), frame.f_globals, scope)
        except Exception:  # measuring must never change the test's failure
            return None
        return _measure_bound(f"assertTrue({ast.unparse(test)}) (difference bound)", value, limit)
    return None


def tolerance_note(check: dict[str, Any], device_epsilon: float | None) -> str | None:
    """Says so when a failed ``allclose``-style check asked for less than one rounding step of
    the values it compared: ``rtol`` and ``atol`` both below half the epsilon of the compared
    dtype (or of the device's format, ``device_epsilon``, when it is the coarser). Such a check
    fails on any two computations that round differently, whatever the device; e.g.
    Transformers' eager-vs-SDPA tests use ``atol 1e-7, rtol 1e-4`` for a device their
    tolerance table does not list, float16 included. ``None`` otherwise, and for bound checks
    (no ``rtol``: the magnitudes compared are unknown)."""
    rtol, atol = check.get("rtol"), check.get("atol") or 0.0
    if rtol is None:
        return None
    steps: list[tuple[float, str]] = []
    dtype = getattr(torch, str(check.get("dtype")), None)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        steps.append((torch.finfo(dtype).eps, str(dtype).replace("torch.", "")))
    if device_epsilon is not None:
        steps.append((device_epsilon, "DL16"))
    if not steps:
        return None
    eps, name = max(steps)
    if rtol >= eps / 2 or atol >= eps / 2:
        return None
    return (
        f"the tolerance is finer than one {name} rounding step: rtol {rtol:g} and atol "
        f"{atol:g} are below half of {name}'s epsilon ({eps / 2:.3g}), so two values near 1 "
        "that round differently fail it"
    )


class ClosenessLog:
    """Wraps the closeness checks between :meth:`install` and :meth:`uninstall` and keeps the
    failed ones in :attr:`failures` (cleared by the caller per test)."""

    def __init__(self) -> None:
        self.failures: list[dict[str, Any]] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self._last_similarity: Any = None

    def reset(self) -> None:
        """Forget what the previous test recorded (called as each test starts)."""
        self.failures.clear()
        self._last_similarity = None

    def _record(self, measured: dict[str, Any] | None) -> None:
        if measured is not None:
            self.failures.append(measured)

    def install(self) -> None:
        if self._saved:
            return
        log = self
        allclose, tensor_allclose = torch.allclose, torch.Tensor.allclose
        assert_close = torch.testing.assert_close

        def wrapped_allclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                             equal_nan: bool = False) -> bool:  # fmt: skip
            result = bool(allclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan))
            if not result:
                log._record(_measure("torch.allclose", input, other, rtol, atol))
            return result

        def wrapped_tensor_allclose(self: torch.Tensor, other: Any, rtol: float = 1e-05,
                                    atol: float = 1e-08, equal_nan: bool = False) -> bool:  # fmt: skip
            result = bool(tensor_allclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan))
            if not result:
                log._record(_measure("Tensor.allclose", self, other, rtol, atol))
            return result

        def wrapped_assert_close(actual: Any, expected: Any, *args: Any, **kwargs: Any) -> None:
            try:
                assert_close(actual, expected, *args, **kwargs)
            except AssertionError:
                log._record(_measure("torch.testing.assert_close", actual, expected,
                                     kwargs.get("rtol"), kwargs.get("atol")))  # fmt: skip
                raise

        wrappers: list[tuple[Any, Any]] = [
            (wrapped_allclose, allclose),
            (wrapped_assert_close, assert_close),
        ]
        for wrapper, original in wrappers:
            wrapper.__doc__ = original.__doc__
            wrapper.__wrapped__ = original
        self._saved = [
            (torch, "allclose", allclose),
            (torch.Tensor, "allclose", tensor_allclose),
            (torch.testing, "assert_close", assert_close),
        ]
        torch.allclose = wrapped_allclose
        torch.Tensor.allclose = wrapped_tensor_allclose  # type: ignore[method-assign,assignment]
        torch.testing.assert_close = wrapped_assert_close
        self._wrap_numpy()
        self._wrap_unittest()

    def _wrap_unittest(self) -> None:
        log = self

        def wrap(name: str, measure: Any) -> None:
            """``TestCase.<name>`` recording ``measure(*operands)`` when it fails."""
            original = getattr(unittest.TestCase, name)

            def wrapped(case: Any, *args: Any, **kwargs: Any) -> None:
                try:
                    original(case, *args, **kwargs)
                except AssertionError:
                    log._record(measure(*args))
                    raise

            wrapped.__doc__ = original.__doc__
            wrapped.__wrapped__ = original  # type: ignore[attr-defined]
            self._saved.append((unittest.TestCase, name, original))
            setattr(unittest.TestCase, name, wrapped)

        def bound(name: str) -> Any:
            def measure(*args: Any) -> dict[str, Any] | None:
                if len(args) < 2:
                    return None
                return _measure_bound(f"{name} (difference bound)", args[0], args[1])

            return measure

        def similarity_bound(*args: Any) -> dict[str, Any] | None:
            if not args or not _false_flag(args[0]):
                return None
            if log._last_similarity is not None:
                return _similarity(log._last_similarity)
            # the test's frame: measure -> wrapped's except clause -> wrapped -> the test
            return _inline_bound(sys._getframe(2))

        wrap("assertLessEqual", bound("assertLessEqual"))
        wrap("assertLess", bound("assertLess"))
        wrap("assertTrue", similarity_bound)
        self._wrap_similarity()

    def _wrap_similarity(self) -> None:
        log = self
        functional = torch.nn.functional
        original = functional.cosine_similarity

        def wrapped_similarity(x1: Any, x2: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(x1, x2, *args, **kwargs)
            # kept as it is: measured only if an assertTrue fails (no transfer inside a model)
            log._last_similarity = result.detach() if isinstance(result, torch.Tensor) else None
            return result

        wrapped_similarity.__doc__ = original.__doc__
        wrapped_similarity.__wrapped__ = original  # type: ignore[attr-defined]
        self._saved += [
            (functional, "cosine_similarity", original),
            (torch, "cosine_similarity", torch.cosine_similarity),
        ]
        functional.cosine_similarity = wrapped_similarity
        torch.cosine_similarity = wrapped_similarity

    def _wrap_numpy(self) -> None:
        try:
            import numpy
        except ImportError:  # pragma: no cover - numpy comes with torch
            return
        log = self
        np_allclose, np_assert = numpy.allclose, numpy.testing.assert_allclose

        def wrapped_np_allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
                                equal_nan: bool = False) -> Any:  # fmt: skip
            result = np_allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
            if not result:
                log._record(_measure("numpy.allclose", a, b, rtol, atol))
            return result

        def wrapped_np_assert(actual: Any, desired: Any, rtol: float = 1e-07, atol: float = 0,
                              *args: Any, **kwargs: Any) -> None:  # fmt: skip
            try:
                np_assert(actual, desired, rtol, atol, *args, **kwargs)
            except AssertionError:
                log._record(_measure("numpy.testing.assert_allclose", actual, desired, rtol, atol))
                raise

        self._saved += [
            (numpy, "allclose", np_allclose),
            (numpy.testing, "assert_allclose", np_assert),
        ]
        numpy.allclose = wrapped_np_allclose  # type: ignore[assignment]
        numpy.testing.assert_allclose = wrapped_np_assert

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []
