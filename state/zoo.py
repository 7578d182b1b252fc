"""What the zoo's commands keep between runs: `zoo check` results, and the entries of an unfinished `zoo lock`.

A check result is kept per model with the fingerprint of the build it checked, so a
caller reuses it only for the same build. A lock entry is kept from the moment its
worker answers until the lock file is written, so a `zoo lock` that crashed resumes
where it stopped; the entries are plain data (harness/zoo/lock.py seals them). A `zoo lock --reverify` or
`--modes-probe` keeps its answered entries the same way, apart, each with the hash of the entry it began from.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.core.record import parse
from state.db import transaction
from state.runs import now


@dataclass(frozen=True)
class CheckRow:
    """One kept `zoo check` result, the shape harness.discovery.check writes (`result_of`, with the limit and where
    it ran): every result is read through it before it is kept and when it is read back; the dict is what is
    stored. Only model and status are in every kept row (the first, v10's, kept no more)."""

    model: str
    status: str
    stratum: str | None = None             # None too where an older flagsweep kept less
    cause: str | None = None
    text_only: bool = False
    fingerprint: str | None = None         # the build checked (the table's column; in data since v10's first rows)
    seconds: float = 0.0
    timeout_s: float | None = None         # the limit it ran under (a timeout is reused only under no larger one)
    where: dict[str, Any] | None = None    # the workers' interpreter and device


def check_results(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Every kept `zoo check` result, by model (RecordError naming a field a kept row should not have)."""
    rows = conn.execute("SELECT model, data FROM zoo_checks")
    return {row["model"]: _checked(json.loads(row["data"])) for row in rows}


def _checked(result: Mapping[str, Any]) -> dict[str, Any]:
    """`result` as given, once it reads as a CheckRow."""
    parse(CheckRow, result, "zoo check result")
    return dict(result)


def record_checks(conn: sqlite3.Connection, results: Iterable[Mapping[str, Any]]) -> None:
    """Keep check results (each with its model, fingerprint, status and timeout_s), replacing a model's older one."""
    typed = [(parse(CheckRow, r, "zoo check result"), r) for r in results]
    rows = [(t.model, t.fingerprint, t.status, t.timeout_s, json.dumps(r, sort_keys=True), now()) for t, r in typed]
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


@dataclass(frozen=True)
class KeptProbe:
    """An entry a `--reverify` or `--modes-probe` job answered, kept until the lock file has it."""

    source: str                    # the hash of the lock entry the job began from: reused only while the lock holds it
    entry: dict[str, Any]


def probe_entries(conn: sqlite3.Connection, job: str, transformers: str) -> dict[str, KeptProbe]:
    """The entries an unfinished run of `job` kept for this transformers version, by model."""
    rows = conn.execute("SELECT model, source, entry FROM zoo_probe_entries WHERE job = ? AND transformers = ?",
                        (job, transformers))
    return {row["model"]: KeptProbe(row["source"], json.loads(row["entry"])) for row in rows}


def keep_probe_entry(conn: sqlite3.Connection, job: str, transformers: str, kept: KeptProbe) -> None:
    """Keep one answered entry of `job` until the lock file has it."""
    with transaction(conn):
        conn.execute("INSERT OR REPLACE INTO zoo_probe_entries (job, transformers, model, source, entry, recorded_at)"
                     " VALUES (?, ?, ?, ?, ?, ?)", (job, transformers, kept.entry["model"], kept.source,
                                                    json.dumps(kept.entry, sort_keys=True), now()))


def forget_probe_entries(conn: sqlite3.Connection, job: str, transformers: str, models: Iterable[str]) -> None:
    """Drop `job`'s kept entries of these models: the lock file has them now."""
    with transaction(conn):
        conn.executemany("DELETE FROM zoo_probe_entries WHERE job = ? AND transformers = ? AND model = ?",
                         [(job, transformers, m) for m in models])
