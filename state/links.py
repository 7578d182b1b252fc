"""Issue links: which GitHub issue stands for which marker key, and its lifecycle as the bot knows it.

`body_sha` holds the hash of the *material* content last written and of the labels
given (bot.issues.material.BodyHash, which writes and reads this string), so an
unchanged nightly plans no write at all.
`closed_by` is `bot`, `human`, or `human-fixed` (a human closed it and the
signature has since been absent: if it returns, that is a regression).
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from state.runs import now


@dataclass
class Link:
    key: str
    repo: str
    number: int
    kind: str                       # tracking | summary
    config: str | None = None
    signature: str | None = None
    state: str = "open"
    closed_by: str | None = None
    muted: bool = False
    cc: list[str] = field(default_factory=list)
    quiet_nightlies: int = 0
    body_sha: str | None = None
    title: str | None = None
    updated_at: str | None = None
    mode: str = ""                  # the mode (harness.core.modes.Mode.key): '' for eval

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _link(row: sqlite3.Row) -> Link:
    return Link(key=row["key"], repo=row["repo"], number=row["number"], kind=row["kind"], config=row["config"],
                signature=row["signature"], state=row["state"], closed_by=row["closed_by"], muted=bool(row["muted"]),
                cc=json.loads(row["cc"] or "[]"), quiet_nightlies=row["quiet_nightlies"], body_sha=row["body_sha"],
                title=row["title"], updated_at=row["updated_at"], mode=row["mode"])


def get(conn: sqlite3.Connection, key: str, repo: str | None = None) -> Link | None:
    """The link for `key` (in `repo`, when given)."""
    row = conn.execute("SELECT * FROM issue_links WHERE key = ?", (key,)).fetchone()
    if row is None or (repo is not None and row["repo"] != repo):
        return None
    return _link(row)


def by_number(conn: sqlite3.Connection, repo: str, number: int) -> Link | None:
    """The link for issue `number` of `repo` (how commands find which key an issue is)."""
    row = conn.execute("SELECT * FROM issue_links WHERE repo = ? AND number = ?", (repo, number)).fetchone()
    return _link(row) if row else None


def all_links(conn: sqlite3.Connection, repo: str | None = None) -> dict[str, Link]:
    """Every link (of `repo`), by key."""
    sql, args = "SELECT * FROM issue_links", []
    if repo is not None:
        sql += " WHERE repo = ?"
        args.append(repo)
    return {r["key"]: _link(r) for r in conn.execute(sql + " ORDER BY key", args)}


def upsert(conn: sqlite3.Connection, link: Link) -> None:
    """Insert or replace a link."""
    conn.execute(
        "INSERT OR REPLACE INTO issue_links (key, repo, number, kind, config, signature, state, closed_by, muted, cc,"
        " quiet_nightlies, body_sha, title, updated_at, mode) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (link.key, link.repo, link.number, link.kind, link.config, link.signature, link.state, link.closed_by,
         int(link.muted), json.dumps(link.cc), link.quiet_nightlies, link.body_sha, link.title, now(), link.mode),
    )


def update(conn: sqlite3.Connection, key: str, **fields: Any) -> None:
    """Change some fields of one link."""
    allowed = {"state", "closed_by", "muted", "cc", "quiet_nightlies", "body_sha", "title", "number", "repo"}
    bad = set(fields) - allowed
    if bad:
        raise ValueError(f"cannot update {', '.join(sorted(bad))}")
    if "cc" in fields:
        fields["cc"] = json.dumps(fields["cc"])
    if "muted" in fields:
        fields["muted"] = int(fields["muted"])
    sets = ", ".join(f"{k} = ?" for k in fields) + ", updated_at = ?"
    conn.execute(f"UPDATE issue_links SET {sets} WHERE key = ?", (*fields.values(), now(), key))


def rekey(conn: sqlite3.Connection, old: str, new: str, signature: str) -> None:
    """Move a tracking issue's link to another key and signature (its signature shifted: same issue, new name)."""
    conn.execute("UPDATE issue_links SET key = ?, signature = ?, quiet_nightlies = 0, updated_at = ? WHERE key = ?",
                 (new, signature, now(), old))


@dataclass(frozen=True)
class Listed:
    """One of the bot's issues as GitHub lists it (bot.github.publish builds it from an IssueRef and the body's
    marker): what `sync` folds into the links."""

    key: str
    number: int
    state: str                      # open | closed
    title: str | None
    kind: str | None                # as the marker says; None: an older marker without one
    config: str | None
    signature: str | None
    body_sha: str | None            # the labels GitHub has (a rebuilt link refreshes its body)
    mode: str = ""                  # as the marker says ('' for eval, and for a marker written before modes)


def sync(conn: sqlite3.Connection, repo: str, seen: Iterable[Listed]) -> dict[str, int]:
    """Fold what GitHub says about the bot's issues into the links; rebuilds lost links from markers.

    An issue the store believes open but GitHub shows closed was closed by a human.
    Returns counts: {"rebuilt", "closed_by_human", "reopened_by_human"}.
    """
    counts = {"rebuilt": 0, "closed_by_human": 0, "reopened_by_human": 0}
    known = all_links(conn, repo)
    for item in seen:
        link = known.get(item.key)
        if link is None:
            upsert(conn, Link(key=item.key, repo=repo, number=item.number, kind=item.kind or "tracking",
                              config=item.config, signature=item.signature, mode=item.mode, state=item.state,
                              closed_by="human" if item.state == "closed" else None, title=item.title,
                              body_sha=item.body_sha))
            counts["rebuilt"] += 1
            continue
        if link.number != item.number:
            # Two issues with one marker: keep the older (lower number), it is the one people link to.
            if item.number > link.number:
                continue
            update(conn, link.key, number=item.number)
        if link.state == "open" and item.state == "closed":
            update(conn, link.key, state="closed", closed_by="human")
            counts["closed_by_human"] += 1
        elif link.state == "closed" and item.state == "open":
            update(conn, link.key, state="open", closed_by=None)
            counts["reopened_by_human"] += 1
    return counts
