"""Webhook deliveries seen, by X-GitHub-Delivery id: each is processed once."""
from __future__ import annotations

import sqlite3

from state.runs import now


def record(conn: sqlite3.Connection, delivery_id: str, event: str, outcome: str) -> bool:
    """Record a delivery; False when this id was seen before (a replay or a GitHub redelivery)."""
    # INSERT OR IGNORE makes the check and the write one statement: two concurrent
    # deliveries with the same id cannot both see "new".
    cur = conn.execute("INSERT OR IGNORE INTO deliveries (id, event, received_at, outcome) VALUES (?, ?, ?, ?)",
                       (delivery_id, event, now(), outcome))
    return cur.rowcount == 1


def get(conn: sqlite3.Connection, delivery_id: str) -> dict | None:
    """One delivery as a dict, or None."""
    row = conn.execute("SELECT * FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
    return dict(row) if row else None


def count(conn: sqlite3.Connection) -> int:
    """How many deliveries are recorded."""
    return conn.execute("SELECT count(*) FROM deliveries").fetchone()[0]
