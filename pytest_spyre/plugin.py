"""The pytest plugin (``pytest11`` entry point ``spyre``). Inert unless ``--spyre`` is given."""

from __future__ import annotations
