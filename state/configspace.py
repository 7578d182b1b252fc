"""The config space of a build: every entry its torch's config modules declare (type, default), kept with the
run's environment, and what changed since the build before."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from state.db import transaction
from state.runs import environment_id, now


def record(conn: sqlite3.Connection, environment: dict[str, Any], modules: list[str],
           entries: dict[str, dict[str, Any]]) -> None:
    """Keep `entries` ({full key: {"type", "default"}}) with the environment, merged with what is kept already
    (a later run may list more modules: inductor's under --backend inductor)."""
    with transaction(conn):
        env_id = environment_id(conn, environment)
        old_modules, old_entries = _load(conn, env_id) or ([], {})
        conn.execute("INSERT OR REPLACE INTO config_spaces (environment_id, modules, entries, recorded_at)"
                     " VALUES (?,?,?,?)", (env_id, json.dumps(sorted({*old_modules, *modules})),
                                           json.dumps({**old_entries, **entries}, sort_keys=True), now()))


def _load(conn: sqlite3.Connection, env_id: int) -> tuple[list[str], dict[str, dict]] | None:
    row = conn.execute("SELECT modules, entries FROM config_spaces WHERE environment_id = ?", (env_id,)).fetchone()
    return (json.loads(row[0]), json.loads(row[1])) if row else None


def of_run(conn: sqlite3.Connection, run_id: int) -> tuple[list[str], dict[str, dict]] | None:
    """(modules, entries) kept with the run's environment; None when none was listed."""
    row = conn.execute("SELECT environment_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return _load(conn, row[0]) if row and row[0] is not None else None


@dataclass(frozen=True)
class SpaceChange:
    """Keys added and removed between the previous build's config space and this run's (same modules only)."""

    previous_torch: str | None
    added: tuple[str, ...]
    removed: tuple[str, ...]


def change_since_previous(conn: sqlite3.Connection, run_id: int) -> SpaceChange | None:
    """The change from the newest earlier run on another torch build that has a config space; None without one."""
    mine = of_run(conn, run_id)
    if mine is None:
        return None
    row = conn.execute(
        "SELECT r.id, e.torch_version FROM runs r JOIN environments e ON e.id = r.environment_id"
        " JOIN config_spaces c ON c.environment_id = r.environment_id"
        " WHERE r.id < ? AND (e.torch_version, coalesce(e.torch_git, '')) !="
        " (SELECT e2.torch_version, coalesce(e2.torch_git, '') FROM runs r2 JOIN environments e2"
        "  ON e2.id = r2.environment_id WHERE r2.id = ?) ORDER BY r.id DESC LIMIT 1", (run_id, run_id)).fetchone()
    if row is None:
        return None
    theirs = of_run(conn, row[0])
    shared = set(mine[0]) & set(theirs[0])
    new = {k for k in mine[1] if _module_of(k, shared)}
    old = {k for k in theirs[1] if _module_of(k, shared)}
    return SpaceChange(row[1], tuple(sorted(new - old)), tuple(sorted(old - new)))


def _module_of(key: str, modules: set[str]) -> bool:
    return any(key.startswith(m + ".") for m in modules)
