"""Regression ranges: for a nightly's new crash or fix of one (config, signature), the builds it lies between.

`good` is the last build that behaved like the previous run, `bad` the first that
behaved like this one (for a fix: the last still failing and the first fixed).
One row per (run, config, signature, kind); searching again replaces it.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from harness.core.record import check_closed
from state.db import transaction
from state import runs
from state.runs import now

KINDS = ("new_crash", "fixed")
STATUSES = ("found", "bounded", "no_series", "failed")
COMPARE_URL = "https://github.com/pytorch/pytorch/compare/{good}...{bad}"


@dataclass(frozen=True)
class Build:
    """One end of a range: a nightly's date, its torch version and git commit."""

    date: str | None
    version: str | None = None
    git: str | None = None


@dataclass
class Range:
    """One stored regression range."""

    run_id: int
    config: str
    signature: str
    kind: str                            # new_crash | fixed
    status: str                          # found | bounded | no_series | failed
    good: Build = field(default_factory=lambda: Build(None))
    bad: Build = field(default_factory=lambda: Build(None))
    models: list[str] = field(default_factory=list)
    installs: int = 0
    probes: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    recorded_at: str | None = None

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"kind": KINDS, "status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, "range")

    @property
    def key(self) -> tuple[str, str, str]:
        """(config, signature, kind)."""
        return (self.config, self.signature, self.kind)

    @property
    def compare(self) -> str | None:
        """GitHub's compare view from the good end's commit to the bad end's, when both are known."""
        if self.status not in ("found", "bounded") or not (self.good.git and self.bad.git):
            return None
        return COMPARE_URL.format(good=self.good.git, bad=self.bad.git)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with the compare link)."""
        return {**asdict(self), "compare": self.compare}


def _range(row: sqlite3.Row) -> Range:
    return Range(run_id=row["run_id"], config=row["config"], signature=row["signature"], kind=row["kind"],
                 status=row["status"], good=Build(row["good_date"], row["good_version"], row["good_git"]),
                 bad=Build(row["bad_date"], row["bad_version"], row["bad_git"]), models=json.loads(row["models"]),
                 installs=row["installs"], probes=json.loads(row["probes"]), reason=row["reason"],
                 recorded_at=row["recorded_at"])


def record(conn: sqlite3.Connection, r: Range) -> None:
    """Store (or replace) one range."""
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO ranges (run_id, config, signature, kind, status, good_date, good_version, good_git,"
            " bad_date, bad_version, bad_git, models, installs, probes, reason, recorded_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r.run_id, r.config, r.signature, r.kind, r.status, r.good.date, r.good.version, r.good.git,
             r.bad.date, r.bad.version, r.bad.git, json.dumps(r.models), r.installs, json.dumps(r.probes),
             r.reason, now()))


def for_run(conn: sqlite3.Connection, run_ids: list[int]) -> list[Range]:
    """The ranges searched for these runs (a nightly's group), ordered by key."""
    if not run_ids:
        return []
    marks = ",".join("?" * len(run_ids))
    rows = conn.execute(f"SELECT * FROM ranges WHERE run_id IN ({marks}) ORDER BY config, signature, kind",
                        list(run_ids)).fetchall()
    return [_range(r) for r in rows]


def latest(conn: sqlite3.Connection, up_to_run: int, mode: str = "") -> dict[tuple[str, str, str], Range]:
    """{(config, signature, kind): the newest range of that key stored for a run of `mode` (its key: '' for eval) up
    to `up_to_run`} (another mode's crash is another issue, with its own range)."""
    rows = conn.execute(
        "SELECT r.*, (SELECT json_extract(u.options, '$.mode') FROM runs u WHERE u.id = r.run_id) AS run_mode"
        " FROM ranges r WHERE r.run_id <= ? ORDER BY r.run_id", (up_to_run,)).fetchall()
    return {(r["config"], r["signature"], r["kind"]): _range(r) for r in rows if runs.mode_key(r["run_mode"]) == mode}


def runs_with(conn: sqlite3.Connection, config: str, signature: str) -> list[int]:
    """Runs that hold a range of (config, signature), newest first."""
    rows = conn.execute("SELECT DISTINCT run_id FROM ranges WHERE config = ? AND signature = ? ORDER BY run_id DESC",
                        (config, signature)).fetchall()
    return [r[0] for r in rows]
