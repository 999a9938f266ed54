"""Why a test failed on the device: one class per failure, decided from the evidence at hand.

:func:`classify` looks at the exception that failed a test phase, the test's record so far
(miscompiles the device reproduced, adapters that failed to prepare) and the closeness checks
that failed in the test (:mod:`pytest_spyre.precision`), and returns a
:class:`~pytest_spyre.record.Failure` in one of these classes, first match wins:

``adapter``
    an adapter failed to prepare (``AdapterApplyError``), or the frame that raised the
    exception (:func:`innermost_package`) is adapter code (``spyre_adapters``): a bug of an
    adapter;
``gap``
    a lowering or layout error of the device (``SpyreLoweringError``) anywhere in the chain: a
    gap of the release stopped the model. Also gap ``fp32-storage``: the device stored the
    test's float32 as float16 (the test's record counts that gap) and code outside the project
    refused float16 ("Unsupported dtype Half", "conversion from numpy.float16 to Decimal is not
    supported"), raised below nothing of ours but mode hooks passing the call through, or an
    assertion of the test compared float16 with float32 (``assert_close``'s dtype check of a
    loss the device computed): the real device stores float32 the same way, so the same code
    fails there (checked before the adapter blame, since such a hook only passed the call on);
``emulator``
    the frame that raised is the device or the plugin (``spyre_sim``, ``pytest_spyre``) and the
    exception is not one the device raises on purpose: a bug of ours. Also ``torch.compile``
    of device tensors (an exception of ``torch._dynamo`` or ``torch._inductor`` in the chain):
    the emulator runs the device eagerly, and dynamo cannot trace its tensor subclass, where
    the real stack compiles through ``torch.compile``: a limit of the emulator, not a gap.
    Also a test that met an emulator limit (a DL16 number its fp16 host tensors cannot hold,
    read or handed to the host), unless the closeness check that failed it compared device
    values the device computed before the limit and did not write since
    (:mod:`spyre_sim.limits`): then the check decides;
``platform``
    code outside the project (PyTorch, a library the test uses) refuses the device type by name:
    the error was raised outside the project's packages and says the device is not supported
    (PyTorch's FlexAttention accepts only cuda, cpu, xpu, hpu and mps tensors). Not a gap of the
    stack, nor a defect of ours: no out-of-tree device passes such a test. Also a test that asks
    for a second device (:class:`~spyre_sim.errors.SpyreDeviceIndexError`, found in a worker's
    traceback when a spawned process raised it): the emulated system is one card, and code
    that puts process ``i`` on device ``i`` (Transformers' tensor- and expert-parallel tests,
    which spawn one process per rank) needs as many as it has ranks;
``miscompile``
    the device reproduced a documented miscompile during the test (wrong numbers, on purpose);
``precision``
    a closeness check (``torch.allclose``, ``torch.testing.assert_close``, ...) failed in the
    test: the device's number format is not as precise as the tolerance asks. Also an
    ``AssertionError`` without a closeness check (tokens or indices compared exactly) in a test
    where the device decided a selection (a router's top-k, an argmax) between values within one
    DL16 step (``rounding_ties``): rounding chose, and the CPU may have chosen otherwise. Either
    line names the selections. Inside an arbitrary test this is the likely cause, not a proof
    (triage and the odd-size probe prove it by replaying the CPU's choices,
    :mod:`spyre_sim.selections`). Also an ``AssertionError`` that speaks of NaN in a test where
    a device result held NaN its operands did not (``nan_made``, :mod:`spyre_sim._nan_made`):
    DL16 has no subnormals, so two tiny numbers the CPU divides are 0/0 on the device; the line
    names the op and module where the NaN began;
``unexplained``
    none of the above. Must not happen: it means a behaviour of the device or of an adapter
    that nobody has explained yet.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from types import CodeType
from typing import Any

from pytest_spyre.record import Failure, TestRecord, counted

__all__ = [
    "EMULATOR_LIMITS",
    "ONE_CARD_PLATFORM",
    "classify",
    "innermost_package",
    "limits_after_text",
    "nan_text",
    "ties_text",
]

#: How the details of ``emulator`` failures that are limits of the emulation (what it does not
#: reproduce), not bugs, begin: a report says "limit" for these and "defect" for the others.
EMULATOR_LIMITS = (
    "torch.compile is not emulated",
    "the emulator could not compute what the device computes",
)
#: How the detail of a ``platform`` failure begins when the test asked for a second device.
ONE_CARD_PLATFORM = "needs more devices than the emulated system has"

_PACKAGES = ("spyre_sim", "spyre_adapters", "pytest_spyre")
#: An assertion's message that speaks of NaN ("has `nan`", "torch.isnan(...)", "NaN found").
_SPEAKS_OF_NAN = re.compile(r"\bnan\b|isnan", re.IGNORECASE)
_COMPILERS = ("torch._dynamo", "torch._inductor")


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        for inner in getattr(exc, "exceptions", ()):  # exception groups
            yield from _chain(inner)
        exc = exc.__cause__ or exc.__context__


def _package_of(filename: str) -> str | None:
    parts = os.path.normpath(filename).split(os.sep)
    for package in _PACKAGES:
        if package in parts[:-1]:
            return package
    return None


#: A refusal of the device type by name: "... only supported on CUDA, CPU ... Found input
#: tensors on spyre device", "... is not supported on spyre".
_REFUSED_DEVICE = re.compile(r"\bsupport.*\bspyre\b|\bspyre\b.*\bsupport", re.I | re.S)

_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})


def innermost_package(exc: BaseException) -> tuple[str, str] | None:
    """``(package, "file:line in function")`` of the frame that raised ``exc`` when it is in one
    of the project's packages, else None.

    That is the innermost traceback frame, except when it is a torch function or dispatch mode
    hook (``__torch_function__``/``__torch_dispatch__``) called from project code: such a hook
    only passed a call through, and the error belongs to the project frame that made the call
    (e.g. an adapter helper asking for ``untyped_storage()`` of a tensor that has none, passed
    through three modes' hooks). Hooks are skipped within the innermost unbroken run of project
    frames only; a hook called straight from a model's code keeps the blame."""
    run = _innermost_run(exc)
    if not run:
        return None
    package, code, line = next((f for f in run if f[1].co_name not in _HOOKS), run[0])
    return package, _where(code, line)


def _innermost_run(exc: BaseException) -> list[tuple[str, CodeType, int]]:
    """``(package, code, line)`` of the innermost unbroken run of project frames of ``exc``'s
    traceback, innermost first (empty when the innermost frame is not the project's)."""
    run = []
    for code, line in reversed(_frames(exc)):
        package = _package_of(code.co_filename)
        if package is None:
            break
        run.append((package, code, line))
    return run


#: Code that does not take float16 saying so (PyTorch's C++ checks, NumPy, the standard library)
_REFUSED_HALF = re.compile(
    r"\b(half|float16)\b.*\b(not (be )?(implemented|supported)|unsupported)\b"
    r"|\b(not (be )?(implemented|supported)|unsupported)\b.*\b(half|float16)\b",
    re.I | re.S,
)
#: a dtype compared where the device gave float16 for float32 (``assert_close``'s attribute
#: check, ``assertEqual(out.dtype, torch.float32)``), or a test's own message about dtypes and
#: float32 (Transformers 5.25's ``test_keep_in_fp32_modules_strict_also_hardcode_fp32``: "part
#: of `_keep_in_fp32_modules_strict` but do not hardcode their dtype"), not a value's repr
#: (``array(0.0016, dtype=float32)``)
_HALF_FOR_FLOAT = re.compile(
    r"torch\.float16 != torch\.float32|torch\.float32 != torch\.float16"
    r"|(fp32|float32).*\bdtypes?\b(?!\s*=)|\bdtypes?\b(?!\s*=).*(fp32|float32)",
    re.I | re.S,
)


def _half_refused(chain: Sequence[BaseException], record: TestRecord) -> Failure | None:
    """Gap ``fp32-storage`` when the device stored float32 as float16 in this test and code
    outside the project (or only our pass-through mode hooks above it) refused float16, or the
    test's own check of a result's dtype found float16 where it expected float32."""
    if "fp32-storage" not in record.gaps:
        return None
    for error in chain:
        if error.__traceback__ is None or not _REFUSED_HALF.search(str(error)):
            continue
        run = _innermost_run(error)
        if all(code.co_name in _HOOKS for _, code, _ in run):
            frames = _frames(error)
            outside = frames[: len(frames) - len(run)]
            called = f" (called in {_where(*outside[-1])})" if outside else ""
            return Failure(
                "gap",
                "the device stores float32 as float16 (gap `fp32-storage`, lasting) and code "
                f"that does not take float16 refused it: {_first_line(error)}{called}",
                gap="fp32-storage",
            )
    for error in chain:
        if isinstance(error, AssertionError) and _HALF_FOR_FLOAT.search(str(error)):
            return Failure(
                "gap",
                "the device stores float32 as float16 (gap `fp32-storage`, lasting) and the "
                f"test checked a result's dtype: {_first_line(error)}",
                gap="fp32-storage",
            )
    return None


def _frames(exc: BaseException) -> list[tuple[CodeType, int]]:
    """``(code, line)`` of each traceback frame of ``exc``, outermost first."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def _where(code: CodeType, line: int) -> str:
    return f"{os.path.basename(code.co_filename)}:{line} in {code.co_name}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}"[:300]


def classify(
    exc: BaseException | None,
    record: TestRecord,
    closeness: Sequence[dict[str, Any]],
    device_format: str,
    device_epsilon: float | None = None,
) -> Failure:
    """The class of a failure (see the module docstring). ``closeness``: the failed closeness
    checks of the test, newest last; ``device_format``: how the device stored the values
    compared (e.g. "DL16 (fp16 storage)"), quoted in precision failures; ``device_epsilon``: the
    epsilon of the device's float format (``None`` when values keep host dtypes), with which a
    precision failure says when the test's tolerance is finer than one rounding step."""
    from pytest_spyre.precision import tolerance_note
    from spyre_adapters.errors import AdapterApplyError
    from spyre_sim.errors import ONE_CARD, SpyreDeviceIndexError, SpyreLoweringError, SpyreSimError

    chain = list(_chain(exc))
    for error in chain:
        if isinstance(error, AdapterApplyError):
            return Failure(
                "adapter", _first_line(error), adapter=f"{error.adapter} {error.version}"
            )
    half = _half_refused(chain, record)
    if half is not None:
        return half
    if exc is not None:
        where = innermost_package(exc)
        if where is not None and where[0] == "spyre_adapters":
            return Failure("adapter", f"{_first_line(exc)} (raised in {where[1]})")
    for error in chain:
        here = isinstance(error, SpyreDeviceIndexError)
        if here or ONE_CARD in str(error):
            return Failure("platform", _one_card_line(error, here))
    for error in chain:
        if isinstance(error, SpyreLoweringError):
            return Failure("gap", str(error).splitlines()[0][:300], gap=error.gap)
    if exc is not None:
        where = innermost_package(exc)
        if where is not None and not isinstance(exc, SpyreSimError):
            return Failure("emulator", f"{_first_line(exc)} (raised in {where[1]})")
    for error in chain:
        refused = _REFUSED_DEVICE.search(str(error)) and error.__traceback__ is not None
        if refused and innermost_package(error) is None:
            return Failure("platform", _first_line(error) + _outside(error))
    for error in chain:
        if type(error).__module__.startswith(_COMPILERS):
            return Failure(
                "emulator",
                f"{EMULATOR_LIMITS[0]}: the emulated device runs eagerly and dynamo "
                f"cannot trace its tensors ({_first_line(error)})",
            )
    if record.emulator_limits and not _compared_before_limits(closeness):
        # from the first such result on, the emulator's numbers are not the device's: what
        # follows (a miscompile recorded downstream, a NaN) may be its consequence
        also = ""
        if record.miscompiles:
            also = "; recorded after or beside it, which it may have caused: " + counted(
                record.miscompiles
            )
        return Failure(
            "emulator",
            f"{EMULATOR_LIMITS[1]}: it holds DL16 numbers in "
            "fp16 host tensors, which " + _limits_text(record.emulator_limits) + ": "
            + counted(record.emulator_limits) + also,
        )  # fmt: skip
    if record.miscompiles:
        gaps = sorted(record.miscompiles)
        return Failure(
            "miscompile",
            "the device reproduced documented wrong numbers: " + counted(record.miscompiles),
            gap=gaps[0],
        )
    if closeness:
        check = dict(closeness[-1])
        check["device_format"] = device_format
        check["device_epsilon"] = device_epsilon
        note = tolerance_note(check, device_epsilon)
        if note is not None:
            check["tolerance_note"] = note
        if record.rounding_ties:
            check["rounding_ties"] = dict(record.rounding_ties)
        if record.nan_made:
            check["nan_made"] = _nan_where(record)
        if record.emulator_limits:
            check["limits_after"] = dict(record.emulator_limits)
        return Failure("precision", _precision_line(check), measured=check)
    if record.nan_made and isinstance(exc, AssertionError) and _SPEAKS_OF_NAN.search(str(exc)):
        made = _nan_where(record)
        return Failure(
            "precision",
            f"{_first_line(exc)}; {nan_text(made)}",
            measured={"nan_made": made, "device_format": device_format},
        )
    if record.rounding_ties and isinstance(exc, AssertionError):
        ties = dict(record.rounding_ties)
        return Failure(
            "precision",
            f"{_first_line(exc)}; {ties_text(ties)}",
            measured={"rounding_ties": ties, "device_format": device_format},
        )
    return Failure("unexplained", _first_line(exc) if exc is not None else "failed")


def ties_text(ties: Mapping[str, int]) -> str:
    """What the ``rounding_ties`` of a test say, for its spyre section."""
    return (
        "the device decided selections between values within one DL16 step, which rounding "
        f"may order either way ({counted(ties)} rows): the CPU may have chosen otherwise"
    )


def _nan_where(record: TestRecord) -> dict[str, int]:
    """A test's ``nan_made`` keyed ``"op in module, module"`` where the modules are known."""
    return {
        f"{op} in {', '.join(record.nan_modules[op])}" if record.nan_modules.get(op) else op: n
        for op, n in sorted(record.nan_made.items())
    }


def nan_text(made: Mapping[str, int]) -> str:
    """What the ``nan_made`` of a test say, for its spyre section."""
    return (
        f"device results held NaN their operands did not ({counted(made)}): DL16 has no "
        "subnormals, so magnitudes below 2**-30 are zero on the device and, e.g., a division "
        "of two tiny numbers is 0/0 there"
    )


#: What each emulator-limit kind loses (see ``spyre_sim.telemetry.count_emulator_limit``).
_LIMITS = {
    "fp16-holder": "flush numbers below 6e-8 that DL16 keeps (down to 2**-30)",
    "fp16-range": "hold +-65472 for numbers beyond 65504 that DL16 keeps (up to about 8.6e9)",
}


def _limits_text(limits: Mapping[str, int]) -> str:
    return " and ".join(_LIMITS.get(kind, kind) for kind in sorted(limits))


def _compared_before_limits(closeness: Sequence[dict[str, Any]]) -> bool:
    """Whether the closeness check that failed the test compared device values the device
    computed before the test's first emulator limit and did not write since
    (:mod:`spyre_sim.limits`): the limit cannot have changed them, and the comparison decides."""
    return bool(closeness) and closeness[-1].get("limits_reached") is False


def limits_after_text(limits: Mapping[str, int]) -> str:
    """The note of a precision failure in a test that also met emulator limits."""
    return (
        f"emulator limits met in this test ({counted(limits)}) came after the compared values "
        "were computed and did not reach them"
    )


def _one_card_line(error: BaseException, here: bool) -> str:
    """The platform line of a test that asked for a second device: the device's own words (from
    a worker's traceback text when the error crossed a process boundary: ``here`` is False)."""
    from spyre_sim.errors import ONE_CARD

    said = next((ln.strip() for ln in str(error).splitlines() if ONE_CARD in ln), "")
    said = said.partition("SpyreDeviceIndexError: ")[2] or said
    where = "" if here else " (in a worker process)"
    return f"{ONE_CARD_PLATFORM}{where}: {said}"[:400]


def _outside(exc: BaseException) -> str:
    frames = _frames(exc)
    return f" (raised in {_where(*frames[-1])})" if frames else ""


def _precision_line(check: dict[str, Any]) -> str:
    parts = [f"{check.get('check', 'closeness check')} failed"]
    if "max_abs_diff" in check:
        parts.append(f"max abs diff {check['max_abs_diff']:.3g}")
    if "max_rel_diff" in check:
        parts.append(f"max rel diff {check['max_rel_diff']:.3g}")
    if "atol" in check or "rtol" in check:
        parts.append(f"(atol {check.get('atol')}, rtol {check.get('rtol')})")
    if check.get("nan"):
        parts.append(f"{check['nan']} NaN")
    parts.append(f"values stored as {check['device_format']}")
    line = ", ".join(parts)
    if check.get("tolerance_note"):
        line = f"{line}; {check['tolerance_note']}"
    if check.get("rounding_ties"):
        line = f"{line}; {ties_text(check['rounding_ties'])}"
    if check.get("nan_made"):
        line = f"{line}; {nan_text(check['nan_made'])}"
    if check.get("limits_after"):
        line = f"{line}; {limits_after_text(check['limits_after'])}"
    return line
