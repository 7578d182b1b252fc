"""Stored jobs of the service: a webhook or the scheduler queues, the job runner claims one at a time.

A comment job's payload is a `CommentJob`: bot.service.webhook writes it, bot.commands.handlers reads it back with
`CommentJob.parse` (a field it does not know is an error, not dropped).
"""
from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Iterable, Mapping

from harness.core import record
from state.db import latest_rows, transaction
from state.runs import now

log = logging.getLogger(__name__)
JOB_STATUSES = ("queued", "running", "done", "failed")
JOB_KINDS = ("nightly", "command", "quick")       # quick: a comment with only help/status/mute/cc


@dataclass
class Job:
    """One stored job."""

    id: int
    kind: str                 # nightly | command | quick (a comment with only help/status/mute/cc)
    payload: dict[str, Any]
    status: str
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0                    # earlier attempts that ended in a GitHub outage
    retry_at: float | None = None        # epoch seconds: not claimed before this
    retry_until: float | None = None     # epoch seconds: after this an outage fails the job

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"kind": JOB_KINDS, "status": JOB_STATUSES}

    def __post_init__(self) -> None:
        record.check_closed(self, f"job {self.id}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class CommentJob:
    """The payload of a `command` or `quick` job: a comment delivery, as much of it as the handlers need.
    Only the issue is required: everything else may be absent (null) in a delivery, and stays readable so."""

    issue: int
    repo: str | None = None
    comment_id: int | None = None        # the comment the reactions go to
    author: str | None = None
    author_association: str | None = None
    body: str = ""
    previous: str | None = None          # an edited comment's body before the edit (its old commands do not run)
    is_pull_request: bool = False
    installation_id: int | None = None
    delivery: str | None = None          # X-GitHub-Delivery

    def to_payload(self) -> dict[str, Any]:
        """What `enqueue` stores."""
        return asdict(self)

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> "CommentJob":
        """A stored payload read back; RecordError naming a field it does not know or the missing issue."""
        return record.parse(cls, payload, "comment job")


def _job(row: sqlite3.Row) -> Job:
    """A stored job as its type (RecordError naming a kind or status this flagsweep does not know)."""
    return Job(id=row["id"], kind=row["kind"], payload=json.loads(row["payload"]), status=row["status"],
               created_at=row["created_at"], started_at=row["started_at"], finished_at=row["finished_at"],
               result=json.loads(row["result"]) if row["result"] else None, error=row["error"],
               attempts=row["attempts"], retry_at=row["retry_at"], retry_until=row["retry_until"])


def _readable(rows: Iterable[sqlite3.Row]) -> list[Job]:
    """The jobs of `rows` that can be read; one that cannot (a kind or status a newer flagsweep wrote, or an edited
    row) is left out of the listing, named in a warning: /healthz, `status` and `jobs` go on with the others."""
    found = []
    for row in rows:
        try:
            found.append(_job(row))
        except record.RecordError as exc:
            log.warning("job %s cannot be read: %s; left out", row["id"], exc)
    return found


def enqueue(conn: sqlite3.Connection, kind: str, payload: dict[str, Any]) -> int:
    """Queue a job; returns its id."""
    cur = conn.execute("INSERT INTO jobs (kind, payload, status, created_at) VALUES (?, ?, 'queued', ?)",
                       (kind, json.dumps(payload, sort_keys=True), now()))
    return cur.lastrowid


def claim_next(conn: sqlite3.Connection, kinds: tuple[str, ...] | None = None, *,
               clock: float | None = None) -> Job | None:
    """Mark the oldest ready queued job (of `kinds`) running and return it (None when there is none)."""
    kinds = kinds or JOB_KINDS   # a kind this flagsweep does not know is never claimed (a newer one wrote it)
    sql = "SELECT * FROM jobs WHERE status = 'queued' AND (retry_at IS NULL OR retry_at <= ?)" \
          f" AND kind IN ({','.join('?' * len(kinds))})"
    args = [time.time() if clock is None else clock, *kinds]
    # BEGIN IMMEDIATE takes the write lock first, so two runners never claim the same job.
    with transaction(conn):
        row = conn.execute(sql + " ORDER BY id LIMIT 1", args).fetchone()
        if row is None:
            return None
        conn.execute("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ?", (now(), row["id"]))
    return get(conn, row["id"])


def finish(conn: sqlite3.Connection, job_id: int, *, result: dict[str, Any] | None = None,
           error: str | None = None) -> None:
    """Mark a job done (or failed when `error` is given)."""
    # Only a running job: one requeued by a shutdown must not be marked done by its old runner.
    conn.execute("UPDATE jobs SET status = ?, finished_at = ?, result = ?, error = ? WHERE id = ? AND status = 'running'",
                 ("failed" if error else "done", now(), json.dumps(result) if result is not None else None,
                  error, job_id))


def retry_later(conn: sqlite3.Connection, job_id: int, *, error: str, delay: float, until: float,
                result: dict[str, Any] | None = None) -> None:
    """Put a running job back in the queue, not to be claimed for `delay` seconds (GitHub was down).

    `until` (epoch seconds) is kept from the first outage on; `result` holds what the
    attempt already finished, so the next one does not repeat it.
    """
    conn.execute("UPDATE jobs SET status = 'queued', started_at = NULL, attempts = attempts + 1, error = ?,"
                 " result = ?, retry_at = ?, retry_until = coalesce(retry_until, ?) WHERE id = ? AND status = 'running'",
                 (error, json.dumps(result) if result is not None else None, time.time() + delay, until, job_id))


def requeue(conn: sqlite3.Connection, job_id: int) -> None:
    """Put a running job back in the queue (graceful shutdown in the middle of it)."""
    conn.execute("UPDATE jobs SET status = 'queued', started_at = NULL WHERE id = ? AND status = 'running'", (job_id,))


def requeue_stale(conn: sqlite3.Connection) -> int:
    """At start-up, put jobs left 'running' by a dead process back in the queue; returns how many."""
    return conn.execute("UPDATE jobs SET status = 'queued', started_at = NULL WHERE status = 'running'").rowcount


def get(conn: sqlite3.Connection, job_id: int) -> Job | None:
    """One job, or None."""
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return _job(row) if row else None


def list_jobs(conn: sqlite3.Connection, *, status: str | None = None, kind: str | None = None,
              limit: int = 50) -> list[Job]:
    """Latest jobs first."""
    rows = latest_rows(conn, "SELECT * FROM jobs", [("status = ?", [status] if status else []),
                                                    ("kind = ?", [kind] if kind else [])], limit)
    return _readable(rows)


def depth(conn: sqlite3.Connection) -> int:
    """How many jobs are waiting."""
    return conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0]


def retrying(conn: sqlite3.Connection) -> list[Job]:
    """Queued jobs waiting for GitHub to come back (oldest first)."""
    return _readable(conn.execute("SELECT * FROM jobs WHERE status = 'queued' AND retry_at IS NOT NULL ORDER BY id"))


def waiting_since(conn: sqlite3.Connection, before: str) -> list[Job]:
    """Ready queued jobs created before `before` (ISO): nothing has taken them for a long time."""
    return _readable(conn.execute("SELECT * FROM jobs WHERE status = 'queued' AND retry_at IS NULL "
                                  "AND created_at < ? ORDER BY id", (before,)))


def running(conn: sqlite3.Connection) -> list[Job]:
    """Jobs marked running (by this process or one that died)."""
    return _readable(conn.execute("SELECT * FROM jobs WHERE status = 'running' ORDER BY id"))


def failed_since(conn: sqlite3.Connection, since: str) -> list[Job]:
    """Jobs that failed at or after `since` (ISO), newest first."""
    return _readable(conn.execute("SELECT * FROM jobs WHERE status = 'failed' AND finished_at >= ? ORDER BY id DESC",
                                  (since,)))


def active(conn: sqlite3.Connection, kind: str) -> bool:
    """Whether a job of this kind is queued or running (one nightly at a time)."""
    return conn.execute("SELECT 1 FROM jobs WHERE kind = ? AND status IN ('queued', 'running') LIMIT 1",
                        (kind,)).fetchone() is not None
