"""The JSON report of a ``--spyre`` run (``--spyre-report FILE``).

Schema (``schema_version`` 1). The document is deterministic: no timings, no timestamps, tests
sorted by node id, so a serial run and a ``pytest-xdist`` run of the same suite write the same
file, and two runs can be diffed::

    {
      "schema_version": 1,
      "tool": "pytest-spyre",
      "stack": {"release": "2026.09", "source": "builtin" | "<user release file>"},
      "lock": null | "<lock file as given>",
      "settings": {"numerics": true, "layout_checks": true, "unsupported": "fail",
                   "compare": false},
      "adapters": {
        "registered": 12,                       # adapter versions registered
        "resolved": ["rope-rotation 1.0.0"],    # applied to matching models at this release
        "retirable": [{"name": "...", "version": "...", "status": "retirable" | "retired",
                       "gaps": ["pow"]}]            # every bridged gap closed at this release;
                                                    # "retired": auto-retired, not applied
      },
      "summary": {
        "tests": 20, "on_device": 19,
        "outcomes": {"passed": 15, "failed": 2, "xfailed": 1, "skipped": 2},
        "gaps_hit": {"sin-cos": 6},             # gap -> tests that hit it (incl. miscompiles)
        "blocked": {"sdpa-gqa": 2},             # gap -> tests it stopped
        "fallbacks": {"aten.arange.default": 40},   # op -> times run on the host
        "miscompiles": {"rotate-half": 3},      # gap -> tests that hit the miscompile
        "emulator_limits": {"fp16-holder": 1},  # kind -> tests the emulator could not compute
                                                # as the device does
        "rounding_ties": {"aten.topk": 2},      # op -> tests where the device decided a
                                                # selection within one DL16 step
        "nan_made": {"aten.div": 1},            # op -> tests where a device result held NaN
                                                # its operands did not (0/0 after DL16 stored
                                                # tiny numbers as zero)
        "adapters_applied": {"rope-rotation 1.0.0": 9},   # adapter -> tests
        "inference_only": 1,                    # tests skipped: backward on the device
        "gap_closed": ["<nodeid>"],             # spyre_xfail markers whose gap is closed
        "worst_agreement": null | {"nodeid": "...", "model": "LlamaForCausalLM",
                                   "cosine": 0.9999, "max_abs_diff": 0.003, "top1": 1.0}
      },
      "tests": [
        {"nodeid": "...", "outcome": "passed|failed|error|skipped|xfailed|xpassed",
         "on_device": true,                     # false for no_spyre tests
         "gaps": {"sin-cos": 4},                # gap -> times hit in this test
         "gap_modules": {"sin-cos": ["model.rotary_emb"]},
         "fallbacks": {"aten.arange.default": 2},
         "miscompiles": {"rotate-half": 2},
         "emulator_limits": {"fp16-holder": 1},   # results the emulator could not compute
                                                 # as the device does (a DL16 number its
                                                 # fp16 host tensors flush); not a miscompile
         "rounding_ties": {"aten.topk": 5},     # op -> rows of selections (a router's top-k)
                                                 # decided between values within one DL16 step
         "nan_made": {"aten.div": 1},           # op -> results holding NaN their operands
         "nan_modules": {"aten.div": ["CLIPModel"]},   # did not, and where
         "adapters": ["rope-rotation 1.0.0"],   # applied; op bridges only where they computed
         "bridged": {"aten.isinf.default": 3},  # op -> calls op bridges computed in this test
         "blocked_by": null | {"gap": "...", "op": "aten.sin.default", "release": "2025.12",
                               "module_path": "...", "closes_in": "2026.09", "lasting": false,
                               "message": "...", "bridged_by": ["rope-rotation 1.0.0"]},
         "compare": [{"model": "...", "cosine": ..., "max_abs_diff": ..., "top1": ...}],
         "inference_only": false, "xfail_gap": null | "sin-cos", "gap_closed": false}
      ]
    }

The same per-test data is attached to JUnit XML as ``record_property`` entries named
``spyre_*`` (see :meth:`pytest_spyre.record.TestRecord.properties`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_spyre.record import TestRecord, tally

if TYPE_CHECKING:
    from pytest_spyre.session import DeviceSession

__all__ = ["SCHEMA_VERSION", "build", "write"]

SCHEMA_VERSION = 1


def _finite(value: Any) -> Any:
    """JSON has no infinity: write non-finite floats as strings ("inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def build(session: DeviceSession, records: list[TestRecord]) -> dict[str, Any]:
    """The report document for a run and its (merged) per-test records."""
    opts = session.options
    view = session.adapters
    ordered = sorted(records, key=lambda r: r.nodeid)
    document: dict[str, Any] = _finite(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": "pytest-spyre",
            "stack": {
                "release": session.release.name,
                "source": "builtin" if session.builtin else str(session.release.source),
            },
            "lock": None if opts.lock is None else str(opts.lock),
            "settings": {
                "numerics": opts.numerics,
                "layout_checks": opts.layout_checks,
                "unsupported": opts.unsupported,
                "harness": opts.harness,
                "compare": opts.compare,
            },
            "adapters": {
                "registered": view.registered,
                "resolved": sorted(view.resolved),
                "retirable": view.retirable,
            },
            "summary": tally(ordered).to_json(),
            "tests": [r.to_json() for r in ordered],
        }
    )
    return document


def write(path: Path, data: dict[str, Any]) -> None:
    """Write the report atomically: a complete file or none (a temporary file beside it is
    renamed into place)."""
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
