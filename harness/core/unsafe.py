"""Flags that are unsafe by their own documentation: their wrong results are expected, shown but never filed.

The reviewed table is unsafe_flags.toml (one key, its unsafe value, torch's reason). A config is unsafe when one of
its settings sets a listed key to its listed value; the planner then keeps the config's wrong results in the
summary issue and the report (with the reason) and files no tracking issue for them. Stdlib only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.core.files import table_entries
from harness.core.record import RecordError

TABLE = Path(__file__).with_name("unsafe_flags.toml")
FIELDS = ("key", "value", "reason")
# A full dotted name under torch (torch._dynamo.config.KEY, nested ones too): what a config's settings are keyed by.
_KEY = re.compile(r"^torch(\.[A-Za-z_][A-Za-z0-9_]*){2,}$")


class UnsafeTableError(RecordError):
    """The unsafe flag table cannot be read as reviewed entries; the message names the file and the entry's key."""


@dataclass(frozen=True)
class Unsafe:
    """One reviewed entry: `key` set to `value` is unsafe, because `reason`."""

    key: str
    value: Any
    reason: str


def load(path: Path | None = None) -> dict[str, Unsafe]:
    """{key: Unsafe} from the table (default: the reviewed one beside this module); UnsafeTableError (one line
    naming the file and the key) on anything but a list of well-formed entries. An empty table is an error too:
    read as "no flag is unsafe", it would file every unsafe flag's expected wrong results."""
    path = path or TABLE
    found: dict[str, Unsafe] = {}
    for where, row in table_entries(path, "unsafe flag table", "unsafe", UnsafeTableError):
        entry = _entry(row, where)
        if entry.key in found:
            raise UnsafeTableError(f"{where}: {entry.key} is listed twice")
        found[entry.key] = entry
    return found


def _entry(row: object, where: str) -> Unsafe:
    """One [[unsafe]] table as an entry; UnsafeTableError naming `where` and the key."""
    if not isinstance(row, dict):
        raise UnsafeTableError(f"{where}: an entry is a table of key, value and reason")
    key = row.get("key")
    if not isinstance(key, str) or not _KEY.match(key):
        raise UnsafeTableError(f"{where}: key {key!r} is not a full dotted torch config name "
                               "(torch._dynamo.config.NAME)")
    where = f"{where}: {key}"
    odd = sorted(set(row) - set(FIELDS))
    if odd or set(FIELDS) - set(row):
        named = f"{odd[0]!r} is not a field" if odd else f"{sorted(set(FIELDS) - set(row))[0]!r} is missing"
        raise UnsafeTableError(f"{where}: {named} (an entry is key, value and reason)")
    value = row["value"]
    if not isinstance(value, (bool, int, float)):
        # "true" in quotes never equals the flag's True: the entry would silently never match
        raise UnsafeTableError(f"{where}: value {value!r} is a {type(value).__name__}; the unsafe setting is "
                               "true, false or a number, unquoted")
    if not isinstance(row["reason"], str) or not row["reason"].strip():
        raise UnsafeTableError(f"{where}: reason must say why (torch's own words), got {row['reason']!r}")
    return Unsafe(key, value, row["reason"])


def reason(settings: Mapping[str, Any], table: Mapping[str, Unsafe]) -> str | None:
    """Why a config (its settings: {key: value}) is unsafe by its own documentation, or None when it is not."""
    for key, value in sorted(settings.items()):
        entry = table.get(key)
        if entry is not None and entry.value == value:
            return f"{key.rsplit('.', 1)[-1]}={value!r}: {entry.reason}"
    return None
