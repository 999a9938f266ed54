"""Reading ``gaps.toml``, the catalogue's gap definitions, every problem collected.

:class:`_GapsFileReader` turns the bytes of the gaps file into its :class:`Gap` table
(id, title, nature, ops, description), checking ids, natures and op names, and that the
catch-all gap ``unlowered`` is defined.
"""

from __future__ import annotations

import re

from spyre_sim.catalogue._model import UNLOWERED_GAP, Gap, GapNature
from spyre_sim.catalogue._reader import _OP_KEY, _Reader, _show
from spyre_sim.problems import Problem

_GAPS_FILE = "gaps.toml"


_TOP_GAPS_FILE_KEYS = frozenset({"schema_version", "gaps"})


_GAP_DEF_KEYS = frozenset({"title", "nature", "ops", "description"})


_GAP_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class _GapsFileReader(_Reader):
    """Parses the gaps file, collecting problems instead of stopping at the first."""

    def gaps_file(self, raw: bytes) -> dict[str, Gap]:
        doc = self._toml(raw)
        if doc is None:
            return {}
        self._schema(doc, versions=(1,))
        self._unknown_keys("", doc, _TOP_GAPS_FILE_KEYS)
        table = self._table("gaps", doc.get("gaps"))
        gaps: dict[str, Gap] = {}
        for gap_id, body in (table or {}).items():
            key = f"gaps.{gap_id}"
            if not _GAP_ID.match(gap_id):
                self.problem(key, "a gap id is lower-case words joined by '-'", gap_id)
                continue
            if not isinstance(body, dict):
                self.problem(key, "must be a table with title, nature, ops, description", body)
                continue
            self._unknown_keys(key, body, _GAP_DEF_KEYS)
            title = self._string(f"{key}.title", body.get("title"))
            description = self._string(f"{key}.description", body.get("description"))
            nature_raw = self._string(f"{key}.nature", body.get("nature"))
            nature: GapNature | None = None
            if nature_raw is not None:
                try:
                    nature = GapNature(nature_raw)
                except ValueError:
                    self.problem(
                        f"{key}.nature",
                        f"unknown nature; one of {', '.join(n.value for n in GapNature)}",
                        nature_raw,
                    )
            ops_raw = body.get("ops", [])
            ops: list[str] = []
            if not isinstance(ops_raw, list):
                self.problem(f"{key}.ops", "must be a list of ATen packet names", ops_raw)
            else:
                for op in ops_raw:
                    if not isinstance(op, str) or not _OP_KEY.match(op):
                        self.problem(f"{key}.ops", 'not an ATen op name like "aten.sin"', op)
                    else:
                        ops.append(op)
            if title is not None and description is not None and nature is not None:
                gaps[gap_id] = Gap(gap_id, title, nature, tuple(ops), description)
        if table is not None and UNLOWERED_GAP not in table:
            self.problems.append(
                Problem(
                    self.source,
                    "gaps",
                    f"the catch-all gap {_show(UNLOWERED_GAP)} must be defined (got nothing)",
                )
            )
        return gaps
