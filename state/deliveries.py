"""Webhook deliveries seen, by X-GitHub-Delivery id: each is processed once."""
from __future__ import annotations

import sqlite3

from state.runs import now


def record(conn: sqlite3.Connection, delivery_id: str, event: str, outcome: str, comment_key: str | None = None) -> bool:
    """Record a delivery; False when this id, or this `comment_key` (a comment's id and body hash), was seen before
    (a replay, a GitHub redelivery, or a captured body re-sent under a new delivery id)."""
    # INSERT OR IGNORE makes the check and the write one statement: two concurrent
    # deliveries with the same id (or comment key: a unique index) cannot both see "new".
    cur = conn.execute("INSERT OR IGNORE INTO deliveries (id, event, received_at, outcome, comment_key) "
                       "VALUES (?, ?, ?, ?, ?)", (delivery_id, event, now(), outcome, comment_key))
    return cur.rowcount == 1


def get(conn: sqlite3.Connection, delivery_id: str) -> dict | None:
    """One delivery as a dict, or None."""
    row = conn.execute("SELECT * FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
    return dict(row) if row else None


def count(conn: sqlite3.Connection) -> int:
    """How many deliveries are recorded."""
    return conn.execute("SELECT count(*) FROM deliveries").fetchone()[0]
