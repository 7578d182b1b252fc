"""Open the SQLite store: WAL mode, schema version check, migrations.

A file that is not SQLite, or is SQLite but not ours, is a StoreError with a
clear message; it is never silently reset.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from state.schema import MIGRATIONS, SCHEMA_VERSION

APP_ID = 0x46535750  # "FSWP" in PRAGMA application_id marks the file as ours


class StoreError(RuntimeError):
    """The state file cannot be used as it is."""


def connect(path: str | Path, *, migrate: bool = True) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the store at `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: not a flagsweep state file ({exc}); move it away or pass --state") from exc
    if tables and app_id != APP_ID:
        conn.close()
        raise StoreError(f"{path}: an SQLite file that flagsweep did not create (application_id={app_id}); refusing to touch it")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path}: schema version {version} is newer than this flagsweep understands ({SCHEMA_VERSION}); upgrade flagsweep")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    if migrate:
        migrate_to(conn, SCHEMA_VERSION)
    return conn


def latest_rows(conn: sqlite3.Connection, sql: str, conditions: list[tuple[str, list[Any]]], limit: int,
                order: str = "id") -> list[sqlite3.Row]:
    """Rows of `sql` that meet each condition given values (one without values is left out), newest first."""
    used = [(clause, values) for clause, values in conditions if values]
    where = " WHERE " + " AND ".join(clause for clause, _ in used) if used else ""
    args = [v for _, values in used for v in values]
    return conn.execute(f"{sql}{where} ORDER BY {order} DESC LIMIT ?", [*args, limit]).fetchall()


def scratch_copy(conn: sqlite3.Connection) -> sqlite3.Connection:
    """An in-memory copy of the store: a dry run goes through the real publish steps here, leaving the file as it was."""
    copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.backup(copy)
    copy.row_factory = sqlite3.Row
    copy.execute("PRAGMA foreign_keys=ON")
    return copy


def migrate_to(conn: sqlite3.Connection, target: int) -> None:
    """Apply migrations one at a time, each in its own transaction."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    while version < target:
        with transaction(conn):
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APP_ID}")
            conn.execute(f"PRAGMA user_version={version + 1}")
        version += 1


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """All or nothing: BEGIN IMMEDIATE (take the write lock first), or a savepoint inside a caller's transaction."""
    if conn.in_transaction:
        conn.execute("SAVEPOINT flagsweep_tx")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO flagsweep_tx")
            conn.execute("RELEASE flagsweep_tx")
            raise
        conn.execute("RELEASE flagsweep_tx")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no ';' inside our SQL literals)."""
    parts = []
    for chunk in script.split(";"):
        lines = [ln.split("--", 1)[0] for ln in chunk.splitlines()]
        text = "\n".join(lines).strip()
        if text:
            parts.append(text)
    return parts
