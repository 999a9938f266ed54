"""``spyre-adapters stacks``: the stack releases, the upstream state each reproduces, and which
gaps each closes and (re)opens; ``--diff OLD NEW``: what changes between two releases.

JSON of the listing (``schema_version`` 1; keys only added, never changed)::

    {"schema_version": 1, "kind": "stacks",
     "releases": [{"name": "2026.08", "date": "2026-08-28", "summary": "...",
                   "upstream": {"from": "2026-07-25", "to": "2026-08-28",
                                "commits": [{"sha": "8068434", "date": "2026-08-28",
                                             "source": ["#4120"]}],
                                "sources": ["docs/STACK.md §5"]},   # or null
                   "sources": ["#3782", ...],      # evidence of this release's own lines
                   "classified_ops": 330,          # op keys with an explicit rule
                   "closes": ["embedding", ...],   # closed here, open at the previous release
                   "opens": ["mem-pool"],          # open here, closed at the previous release
                   "open": [...],                  # every gap open at this release
                   "changes": {"gaps": [<gap change>], "ops": [<op change>]}}]}

JSON of ``--diff OLD NEW``::

    {"schema_version": 1, "kind": "stacks-diff", "from": "2026.08", "to": "2026.09",
     "gaps": [{"gap": "sin-cos", "from": "fallback", "to": "closed", "set_in": "2026.09",
               "source": ["#4287"], "note": ""}],
     "ops": [{"op": "aten.sin", "from": {"decision": "cpu-fallback", "gap": "sin-cos"},
              "to": {"decision": "native", "gap": null}, "set_in": "2026.09",
              "source": ["#4287"], "note": "..."}],
     "miscompiles": [{"gap": "mem-pool", "change": "goes", "set_in": "2026.09",
                      "source": [...]}, {"op": ..., "change": "appears", ...}]}

A change's ``set_in`` is the release (after OLD, up to NEW) whose file set the new value and
``source`` that line's evidence. ``OLD`` and ``NEW`` are release names or upstream version
strings (``0.0.1+g<sha>``, ``release-2026-09-22``).
"""

from __future__ import annotations

import argparse
from typing import Any

from spyre_adapters.cli._context import catalogue_for
from spyre_adapters.cli._exitcodes import ExitCode
from spyre_adapters.cli._output import TableData, add_output_options, diagnose, emit
from spyre_adapters.stacks import release_diff, release_of

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "stacks",
        help="list the stack releases and the gaps each closes or opens; --diff two of them",
        description="List the stack releases (oldest first): the upstream state each "
        "reproduces, the evidence behind it, and the gaps each closes or opens. With --diff "
        "OLD NEW: the gaps, ops and miscompiles that change from OLD to NEW.",
    )
    parser.add_argument(
        "--diff",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="show what changes from release OLD to the newer release NEW",
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    if args.diff:
        return _diff(args, *args.diff)
    catalogue = catalogue_for(args)
    gaps = list(catalogue.gaps)
    releases: list[dict[str, Any]] = []
    table = TableData(
        "Stack releases",
        ["release", "upstream", "ops", "closes", "opens", "summary"],
    )
    previous_open: set[str] | None = None
    previous_name: str | None = None
    for release in catalogue.releases:
        open_now = [g for g in gaps if release.gap_open(g)]
        closes = (
            []
            if previous_open is None
            else [g for g in gaps if g in previous_open and g not in open_now]
        )
        opens = [] if previous_open is None else [g for g in open_now if g not in previous_open]
        date = getattr(release, "date", None)
        summary = str(getattr(release, "summary", ""))
        upstream = _upstream(getattr(release, "upstream", None))
        op_rules = getattr(release, "op_rules", None)
        classified = len(op_rules) if op_rules is not None else None
        changes = (
            _diff_document(release_diff(catalogue, previous_name, release.name))
            if previous_name is not None and op_rules is not None
            else {"gaps": [], "ops": []}
        )
        releases.append(
            {
                "name": release.name,
                "date": date.isoformat() if date is not None else None,
                "summary": summary,
                "upstream": upstream,
                "sources": list(getattr(release, "delta_sources", ())),
                "classified_ops": classified,
                "closes": closes,
                "opens": opens,
                "open": open_now,
                "changes": {"gaps": changes["gaps"], "ops": changes["ops"]},
            }
        )
        table.rows.append(
            [
                release.name,
                f"{upstream['from']}..{upstream['to']}"
                if upstream is not None
                else (date.isoformat() if date is not None else ""),
                str(classified) if classified is not None else "",
                ", ".join(closes) or ("(first release)" if previous_open is None else "-"),
                ", ".join(opens) or "-",
                summary,
            ]
        )
        previous_open = set(open_now)
        previous_name = release.name
    table.caption = (
        "upstream: the dated torch-spyre state the release reproduces; ops: op keys with an "
        "explicit verdict (every other op is unsupported, gap unlowered-op)"
    )
    emit(args, {"schema_version": 1, "kind": "stacks", "releases": releases}, [table])
    return ExitCode.OK


def _upstream(upstream: Any) -> dict[str, Any] | None:
    if upstream is None:
        return None
    return {
        "from": upstream.start.isoformat(),
        "to": upstream.end.isoformat(),
        "commits": [
            {"sha": c.sha, "date": c.date.isoformat(), "source": list(c.source)}
            for c in upstream.commits
        ],
        "sources": list(upstream.sources),
    }


def _rule(rule: Any) -> dict[str, Any]:
    return {"decision": rule.decision.value, "gap": rule.gap}


def _diff_document(diff: Any) -> dict[str, Any]:
    gaps = [
        {
            "gap": c.gap,
            "from": c.before.value if c.before is not None else None,
            "to": c.after.value,
            "set_in": c.set_in,
            "source": list(c.source),
            "note": c.note,
        }
        for c in diff.gaps
    ]
    ops = [
        {
            "op": c.op,
            "from": _rule(c.before),
            "to": _rule(c.after),
            "set_in": c.set_in,
            "source": list(c.after.source),
            "note": c.after.note,
        }
        for c in diff.ops
    ]
    miscompiles: list[dict[str, Any]] = []
    for change in diff.miscompiles:
        if hasattr(change, "gap"):
            entry: dict[str, Any] = {"gap": change.gap, "source": list(change.source)}
        else:
            entry = {"op": change.op, "source": list(change.after.source)}
        entry.update({"change": change.miscompile, "set_in": change.set_in})
        miscompiles.append(entry)
    return {"gaps": gaps, "ops": ops, "miscompiles": miscompiles}


def _diff(args: argparse.Namespace, old_spec: str, new_spec: str) -> int:
    catalogue = catalogue_for(args)
    old, new = release_of(old_spec, catalogue), release_of(new_spec, catalogue)
    if not old.version < new.version:
        diagnose(
            f"error: --diff goes from an older release to a newer one (got {old.name} -> "
            f"{new.name}); write --diff {new.name} {old.name}"
        )
        return ExitCode.USAGE
    document = _diff_document(release_diff(catalogue, old.name, new.name))
    title = f"{old.name} -> {new.name}"

    def show(rule: dict[str, Any]) -> str:
        return str(rule["decision"]) + (f" ({rule['gap']})" if rule["gap"] else "")

    gap_table = TableData(
        f"Gaps {title}",
        ["gap", "from", "to", "set in", "source"],
        rows=[
            [g["gap"], g["from"] or "-", g["to"], g["set_in"], ", ".join(g["source"]) or "-"]
            for g in document["gaps"]
        ],
    )
    op_table = TableData(
        f"Ops {title}",
        ["op", "from", "to", "set in", "source"],
        rows=[
            [o["op"], show(o["from"]), show(o["to"]), o["set_in"], ", ".join(o["source"]) or "-"]
            for o in document["ops"]
        ],
    )
    miscompile_table = TableData(
        f"Miscompiles {title}",
        ["gap or op", "change", "set in", "source"],
        rows=[
            [m.get("gap") or m["op"], m["change"], m["set_in"], ", ".join(m["source"]) or "-"]
            for m in document["miscompiles"]
        ],
        caption="appears: a silent wrong answer starts at NEW; goes: it is fixed by NEW",
    )
    for table in (gap_table, op_table, miscompile_table):
        if not table.rows:
            table.rows.append(["(none)", *[""] * (len(table.columns) - 1)])
    emit(
        args,
        {
            "schema_version": 1,
            "kind": "stacks-diff",
            "from": old.name,
            "to": new.name,
            **document,
        },
        [gap_table, op_table, miscompile_table],
    )
    return ExitCode.OK
