"""The outbox: every GitHub action is stored before it is sent and marked done after.

A crash mid-publish leaves entries `pending` or `sending`; the next publish
sends them first. `sending` means "may have reached GitHub": the publisher then
looks before it writes again (by marker), so nothing is doubled.

Each action stores one payload type (`PAYLOADS`): `enqueue` writes it, `_entry` reads it back with the strict
reader (harness.core.record), so a field the reader does not know, or a required one that is missing, is an
error naming it. The stored JSON is the dataclass's fields, as it has been since the first store.
"""
from __future__ import annotations

import json
import sqlite3
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Union

from harness.core import record
from state.db import transaction
from state.runs import now


@dataclass(frozen=True)
class IssuePayload:
    """An issue write the planner stored (bot.issues.lifecycle.Action.payload): the issue, its rendered text and
    the body hash in its stored form (bot.issues.material), kept with the link once the write is done."""

    number: int | None               # None until the issue is filed
    kind: str                        # tracking | summary
    title: str | None = None
    body: str | None = None
    labels: list[str] | None = None
    material: str | None = None
    config: str | None = None
    signature: str | None = None
    reason: str = ""
    mode: str = ""                   # the issue's mode (harness.core.modes.Mode.key): '' for eval


@dataclass(frozen=True)
class Reaction:
    """A reaction to a comment (`content`: +1, eyes, confused, ...)."""

    comment_id: int
    content: str


Payload = Union[IssuePayload, Reaction]
PAYLOADS: dict[str, type[IssuePayload] | type[Reaction]] = {
    "create": IssuePayload, "edit": IssuePayload, "comment": IssuePayload, "close": IssuePayload,
    "reopen": IssuePayload, "labels": IssuePayload, "react": Reaction,
}
ACTIONS = tuple(PAYLOADS)


@dataclass(frozen=True)
class Result:
    """What a sent entry became on GitHub, kept as JSON in the shape each action wrote: the issue's number (None: a
    reaction names none), `adopted` (stored only when true: an issue already there was taken over), and for a
    posted comment its id (stored even when None: the publisher gave none)."""

    number: int | None = None
    adopted: bool = False
    comment: int | None = None
    posted: bool = False          # a comment was posted (the stored form has a "comment" key)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: only the keys the action sets."""
        number = {} if self.number is None else {"number": self.number}
        return {**number, **({"adopted": True} if self.adopted else {}),
                **({"comment": self.comment} if self.posted else {})}

    @classmethod
    def from_dict(cls, data: Any, what: str) -> "Result":
        """The stored form read back (RecordError naming an unknown field)."""
        found = record.parse(cls, data, what)
        return cls(found.number, found.adopted, found.comment, posted="comment" in data)


@dataclass
class Entry:
    id: int
    run_id: int | None
    batch: str
    seq: int
    key: str
    action: str
    payload: Payload
    status: str
    attempts: int
    result: Result | None
    error: str | None

    @property
    def uncertain(self) -> bool:
        """It may have been sent before (a crash or a lost answer)."""
        return self.status == "sending" or self.attempts > 0


def _entry(row: sqlite3.Row) -> Entry:
    return Entry(id=row["id"], run_id=row["run_id"], batch=row["batch"], seq=row["seq"], key=row["key"],
                 action=row["action"], payload=read_payload(row["action"], json.loads(row["payload"]),
                                                            f"outbox entry {row['id']}"),
                 status=row["status"],
                 attempts=row["attempts"], result=_result(row),
                 error=row["error"])


def _result(row: sqlite3.Row) -> Result | None:
    """A done entry's result, as its type (None: not sent yet)."""
    if not row["result"]:
        return None
    return Result.from_dict(json.loads(row["result"]), f"outbox entry {row['id']}'s result")


def read_payload(action: str, data: Any, what: str) -> Payload:
    """The stored payload of an `action` entry as its type; RecordError naming the action or field it cannot read."""
    if action not in PAYLOADS:
        raise record.RecordError(f"{what}: unknown action {action!r}")
    return record.parse(PAYLOADS[action], data, f"{what} ({action})")


def new_batch() -> str:
    """A fresh batch id (one publish)."""
    return uuid.uuid4().hex[:12]


def enqueue(conn: sqlite3.Connection, batch: str, run_id: int | None,
            actions: Iterable[tuple[str, str, Payload]]) -> list[int]:
    """Store (key, action, payload) triples, in order, in one transaction."""
    ids = []
    with transaction(conn):
        for seq, (key, action, payload) in enumerate(actions):
            if action not in PAYLOADS:
                raise ValueError(f"unknown outbox action {action!r}")
            if type(payload) is not PAYLOADS[action]:
                raise ValueError(f"outbox action {action!r} stores a {PAYLOADS[action].__name__}, "
                                 f"not a {type(payload).__name__}")
            cur = conn.execute(
                "INSERT INTO outbox (run_id, batch, seq, key, action, payload, created_at) VALUES (?,?,?,?,?,?,?)",
                (run_id, batch, seq, key, action, json.dumps(_stored(payload), sort_keys=True), now()))
            ids.append(cur.lastrowid)
    return ids


def _stored(payload: Payload) -> dict[str, Any]:
    """A payload's stored form: an eval issue's without its mode, as every entry was stored before modes."""
    data = asdict(payload)
    if isinstance(payload, IssuePayload) and not payload.mode:
        del data["mode"]
    return data


def unfinished(conn: sqlite3.Connection) -> list[Entry]:
    """Entries still to send (pending or interrupted while sending), oldest first."""
    rows = conn.execute("SELECT * FROM outbox WHERE status IN ('pending', 'sending') ORDER BY id")
    return [_entry(r) for r in rows]


def mark_sending(conn: sqlite3.Connection, entry_id: int) -> None:
    """About to send: from now on it may reach GitHub."""
    conn.execute("UPDATE outbox SET status = 'sending', attempts = attempts + 1 WHERE id = ?", (entry_id,))


def mark_done(conn: sqlite3.Connection, entry_id: int, result: Result | None = None) -> None:
    """Sent (or found already there)."""
    conn.execute("UPDATE outbox SET status = 'done', result = ?, error = NULL, done_at = ? WHERE id = ?",
                 (json.dumps((result or Result()).to_dict(), sort_keys=True), now(), entry_id))


def mark_pending(conn: sqlite3.Connection, entry_id: int, error: str) -> None:
    """Could not send now (GitHub down): try again next time."""
    conn.execute("UPDATE outbox SET status = 'pending', error = ? WHERE id = ?", (error[:2000], entry_id))


def mark_failed(conn: sqlite3.Connection, entry_id: int, error: str) -> None:
    """GitHub refused it for good (4xx): do not retry."""
    conn.execute("UPDATE outbox SET status = 'failed', error = ?, done_at = ? WHERE id = ?",
                 (error[:2000], now(), entry_id))


def entries(conn: sqlite3.Connection, batch: str | None = None) -> list[Entry]:
    """All entries (of one batch), in order."""
    sql, args = "SELECT * FROM outbox", []
    if batch:
        sql += " WHERE batch = ?"
        args.append(batch)
    return [_entry(r) for r in conn.execute(sql + " ORDER BY id", args)]


def counts(conn: sqlite3.Connection, batch: str | None = None) -> Counter[str]:
    """{status: count} (of one batch; a status no entry has counts 0)."""
    sql, args = "SELECT status, count(*) FROM outbox", []
    if batch:
        sql += " WHERE batch = ?"
        args.append(batch)
    return Counter({s: n for s, n in conn.execute(sql + " GROUP BY status", args)})


@dataclass(frozen=True)
class Posted:
    """A comment the bot posted (an outbox entry done): on which issue, by which run, why, and that run's date."""

    number: int
    run_id: int | None
    reason: str
    day: str                      # the posting run's nightly date, else the day it started (YYYY-MM-DD)


def posted_comments(conn: sqlite3.Connection) -> list[Posted]:
    """Every comment the bot has posted on an issue, oldest first (what the daily comment budget counts)."""
    rows = conn.execute(
        "SELECT json_extract(o.result, '$.number') AS number, o.run_id, json_extract(o.payload, '$.reason') AS reason,"
        " COALESCE(r.nightly, substr(r.started_at, 1, 10), substr(o.done_at, 1, 10)) AS day"
        " FROM outbox o LEFT JOIN runs r ON r.id = o.run_id"
        " WHERE o.action = 'comment' AND o.status = 'done' ORDER BY o.id")
    return [Posted(int(r["number"]), r["run_id"], r["reason"] or "", r["day"] or "") for r in rows
            if r["number"] is not None]
