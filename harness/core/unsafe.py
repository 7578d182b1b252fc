"""Flags that are unsafe by their own documentation: their wrong results are expected, shown but never filed.

The reviewed table is unsafe_flags.toml (one key, its unsafe value, torch's reason). A config is unsafe when one of
its settings sets a listed key to its listed value; the planner then keeps the config's wrong results in the
summary issue and the report (with the reason) and files no tracking issue for them. Stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.core.files import read_toml
from harness.core.record import RecordError

TABLE = Path(__file__).with_name("unsafe_flags.toml")


@dataclass(frozen=True)
class Unsafe:
    """One reviewed entry: `key` set to `value` is unsafe, because `reason`."""

    key: str
    value: Any
    reason: str


def load(path: Path = TABLE) -> dict[str, Unsafe]:
    """{key: Unsafe}; RecordError (one line) on a malformed entry or a key listed twice."""
    found: dict[str, Unsafe] = {}
    for i, row in enumerate(read_toml(path, "unsafe flag table").get("unsafe", [])):
        if not isinstance(row, dict) or set(row) != {"key", "value", "reason"}:
            raise RecordError(f"{path.name}: unsafe #{i + 1}: an entry is key, value and reason")
        if row["key"] in found:
            raise RecordError(f"{path.name}: unsafe #{i + 1}: {row['key']} is listed twice")
        found[row["key"]] = Unsafe(row["key"], row["value"], row["reason"])
    return found


def reason(settings: Mapping[str, Any], table: Mapping[str, Unsafe]) -> str | None:
    """Why a config (its settings: {key: value}) is unsafe by its own documentation, or None when it is not."""
    for key, value in sorted(settings.items()):
        entry = table.get(key)
        if entry is not None and entry.value == value:
            return f"{key.rsplit('.', 1)[-1]}={value!r}: {entry.reason}"
    return None
