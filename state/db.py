"""Open the SQLite store: WAL mode, schema version check, migrations.

A file that is not SQLite, or is SQLite but not ours, is a StoreError with a
clear message; it is never silently reset.
"""
from __future__ import annotations

import os
import sqlite3
import time
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
    _check_location(path)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    try:
        # One read transaction: another process may be creating the store right now, and the three
        # values must come from the same snapshot (tables without the id would look foreign).
        conn.execute("BEGIN")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        # Not the file's fault (it could not even be opened or locked): never advise moving it away.
        conn.close()
        raise StoreError(f"{path}: cannot open the state file ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: not a flagsweep state file ({exc}); move it away or pass --state") from exc
    if tables and app_id != APP_ID:
        conn.close()
        raise StoreError(f"{path}: an SQLite file that flagsweep did not create (application_id={app_id}); refusing to touch it")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path}: schema version {version} is newer than this flagsweep understands ({SCHEMA_VERSION}); upgrade flagsweep")
    _use_wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    if migrate:
        migrate_to(conn, SCHEMA_VERSION)
    return conn


def latest_rows(conn: sqlite3.Connection, sql: str, conditions: list[tuple[str, list[Any]]], limit: int,
                order: str = "id") -> Iterator[sqlite3.Row]:
    """Rows of `sql` that meet each condition given values (one without values is left out), newest first, read as
    they are taken (`limit` -1: all of them, so a reader that skips some stops as soon as it has enough)."""
    used = [(clause, values) for clause, values in conditions if values]
    where = " WHERE " + " AND ".join(clause for clause, _ in used) if used else ""
    args = [v for _, values in used for v in values]
    return conn.execute(f"{sql}{where} ORDER BY {order} DESC LIMIT ?", [*args, limit])


def scratch_copy(conn: sqlite3.Connection) -> sqlite3.Connection:
    """An in-memory copy of the store: a dry run goes through the real publish steps here, leaving the file as it was."""
    copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.backup(copy)
    copy.row_factory = sqlite3.Row
    copy.execute("PRAGMA foreign_keys=ON")
    return copy


def _use_wal(conn: sqlite3.Connection, patience_s: float = 30.0) -> None:
    """Switch the store to WAL mode (once per file; later opens find it so).

    Changing the journal mode needs an exclusive lock and SQLite does not wait
    for it through the busy timeout: when several processes open a new store at
    once, the losers see "database is locked" and try again here.
    """
    deadline = time.monotonic() + patience_s
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _check_location(path: Path) -> None:
    """Refuse, before any work starts, a state path that SQLite could not write (a folder, read-only)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{path}: cannot create its folder ({exc.strerror})") from None
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a state file; pass e.g. --state {path / 'state.sqlite'}")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(f"{path}: the state file is read-only to this user; flagsweep writes every result to it "
                         "(make it writable, or pass --state)")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        # WAL mode keeps two files beside the store (-wal, -shm); SQLite must be able to create them.
        raise StoreError(f"{path}: its folder {path.parent} is read-only to this user; SQLite needs to create "
                         f"{path.name}-wal and {path.name}-shm beside it (make the folder writable, or pass --state)")


def migrate_to(conn: sqlite3.Connection, target: int) -> None:
    """Apply migrations one at a time, each in its own transaction.

    Several processes may open a brand-new store at once: the version is read
    again under the write lock, so a migration another process already applied
    is skipped, not run twice.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] >= target:
        return                      # the usual case: no write lock taken
    while True:
        with transaction(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version >= target:
                return
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APP_ID}")
            conn.execute(f"PRAGMA user_version={version + 1}")


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
