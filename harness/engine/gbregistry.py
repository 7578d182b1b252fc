"""Dynamo's graph-break registry of the torch under test: gb_type -> id ('GB0124'). Runs in a worker only.

torch ships `torch/_dynamo/graph_break_registry.json` ({id: [entry, older entries...]}, each entry with
its Gb_type, Explanation and Hints). Every gb_type an id ever had maps to that id, as Dynamo's own
lookup does, so a reworded break keeps its id. A torch without the file has no ids.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.signature import graph_break_type, linked_gb_id


@lru_cache(maxsize=1)
def registry() -> dict[str, str]:
    """{gb_type: id} from the registry file of the imported torch ({} where it has none)."""
    import torch._dynamo

    path = Path(torch._dynamo.__file__).with_name("graph_break_registry.json")
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {entry["Gb_type"]: gb_id for gb_id, entries in sorted(data.items()) for entry in entries}


def reason_id(reason: str, table: dict[str, str] | None = None) -> str | None:
    """The registry id of one graph-break reason (a counter key): its gb_type looked up, else its link."""
    table = registry() if table is None else table
    gb_type = graph_break_type(reason)
    return table.get(gb_type or "") or linked_gb_id(reason)


def error_id(exc: BaseException, table: dict[str, str] | None = None) -> str | None:
    """The registry id of an Unsupported error (or one it was raised from), by its gb_type."""
    table = registry() if table is None else table
    seen: set[int] = set()
    cur: Any = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        gb_type = getattr(cur, "gb_type", None)  # Dynamo's Unsupported carries it
        if gb_type and gb_type in table:
            return table[gb_type]
        cur = cur.__cause__ or cur.__context__
    return reason_id(str(exc), table)
