"""Named counters in the store: one place hands out numbers that several threads or processes share."""
from __future__ import annotations

import sqlite3

from state.db import transaction


def take(conn: sqlite3.Connection, name: str, *, above: int = 0) -> int:
    """The next number of counter `name`, greater than every number it gave before and than `above`."""
    with transaction(conn):
        row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        value = max(row[0] if row else 0, above) + 1
        conn.execute("INSERT INTO counters (name, value) VALUES (?, ?) "
                     "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (name, value))
    return value
