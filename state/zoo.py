"""What the zoo's commands keep between runs: `zoo check` results, and the entries of an unfinished `zoo lock`.

A check result is kept per model with the fingerprint of the build it checked, so a
caller reuses it only for the same build. A lock entry is kept from the moment its
worker answers until the lock file is written, so a `zoo lock` that crashed resumes
where it stopped; the entries are plain data (harness/zoo/lock.py seals them).
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable

from state.db import transaction
from state.runs import now


def check_results(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Every kept `zoo check` result, by model."""
    return {row["model"]: json.loads(row["data"]) for row in conn.execute("SELECT model, data FROM zoo_checks")}


def record_checks(conn: sqlite3.Connection, results: Iterable[dict[str, Any]]) -> None:
    """Keep check results (each with its model, fingerprint, status and timeout_s), replacing a model's older one."""
    rows = [(r["model"], r["fingerprint"], r["status"], r.get("timeout_s"), json.dumps(r, sort_keys=True), now())
            for r in results]
    with transaction(conn):
        conn.executemany("INSERT OR REPLACE INTO zoo_checks (model, fingerprint, status, timeout_s, data, checked_at)"
                         " VALUES (?, ?, ?, ?, ?, ?)", rows)


def lock_entries(conn: sqlite3.Connection, transformers: str) -> dict[str, dict[str, Any]]:
    """The entries an unfinished lock for this transformers version has made, by model."""
    rows = conn.execute("SELECT model, entry FROM zoo_lock_entries WHERE transformers = ?", (transformers,))
    return {row["model"]: json.loads(row["entry"]) for row in rows}


def keep_lock_entry(conn: sqlite3.Connection, transformers: str, entry: dict[str, Any]) -> None:
    """Keep one finished lock entry until the lock file has it."""
    conn.execute("INSERT OR REPLACE INTO zoo_lock_entries (transformers, model, entry, recorded_at) VALUES (?, ?, ?, ?)",
                 (transformers, entry["model"], json.dumps(entry, sort_keys=True), now()))


def forget_lock_entries(conn: sqlite3.Connection, transformers: str, models: Iterable[str]) -> None:
    """Drop kept entries: the lock file has them now, or a fresh lock redoes them."""
    with transaction(conn):
        conn.executemany("DELETE FROM zoo_lock_entries WHERE transformers = ? AND model = ?",
                         [(transformers, m) for m in models])
