"""What each user's comment commands cost, kept in the store so that a restart of `serve` resets nothing.

The per-user hourly budget counts the commands that start work (`run`) and the answers a user made the bot give
without running anything (`refused`, `usage`, `paused`: the reply that the bot is paused); `limited` notes that a
user was told about the limit. Rows older
than a day are dropped as new ones come in. bot.commands.context.PermissionGate is the one caller.
"""
from __future__ import annotations

import sqlite3

from state.db import transaction

BUDGET_KINDS = ("run", "refused", "usage", "paused")   # what the hourly budget counts
KINDS = BUDGET_KINDS + ("limited",)
WINDOW = 3600.0                              # seconds: the budget is per hour
KEEP = 86400.0                               # seconds a row is kept


def spend(conn: sqlite3.Connection, login: str, where: tuple[str, int], kind: str, *, at: float,
          per_hour: int) -> bool:
    """Count one `kind` for the user unless the hour's budget is spent; False when it is (nothing counted)."""
    if kind not in BUDGET_KINDS:
        raise ValueError(f"budget kind {kind!r} is not one of {', '.join(BUDGET_KINDS)}")
    # BEGIN IMMEDIATE: the two job lanes cannot both see the last unit free.
    with transaction(conn):
        conn.execute("DELETE FROM command_spend WHERE at < ?", (at - KEEP,))
        used = conn.execute(f"SELECT count(*) FROM command_spend WHERE login = ? AND at > ? AND kind IN "
                            f"({','.join('?' * len(BUDGET_KINDS))})",
                            (login.lower(), at - WINDOW, *BUDGET_KINDS)).fetchone()[0]
        if used >= per_hour:
            return False
        _insert(conn, login, where, kind, at)
    return True


def note(conn: sqlite3.Connection, login: str, where: tuple[str, int], kind: str, *, at: float) -> None:
    """Record that the user was told something (`limited`) without counting it against the budget."""
    if kind not in KINDS:
        raise ValueError(f"budget kind {kind!r} is not one of {', '.join(KINDS)}")
    _insert(conn, login, where, kind, at)


def told(conn: sqlite3.Connection, login: str, kind: str, *, since: float, where: tuple[str, int] | None = None) -> bool:
    """Whether a `kind` row of the user exists after `since` (on the issue `where`, when given)."""
    sql, args = "SELECT 1 FROM command_spend WHERE login = ? AND kind = ? AND at > ?", [login.lower(), kind, since]
    if where is not None:
        sql += " AND repo = ? AND issue = ?"
        args += [where[0], where[1]]
    return conn.execute(sql + " LIMIT 1", args).fetchone() is not None


def _insert(conn: sqlite3.Connection, login: str, where: tuple[str, int], kind: str, at: float) -> None:
    conn.execute("INSERT INTO command_spend (login, repo, issue, kind, at) VALUES (?, ?, ?, ?, ?)",
                 (login.lower(), where[0], where[1], kind, at))
