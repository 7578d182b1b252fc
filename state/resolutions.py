"""How the bot's tracking issues ended on GitHub, and the precision measured from it.

One row per tracking issue the bot opened, refreshed each publish from the listing of the bot's issues
(bot.github.publish). A resolution is `open`, `fixed_by_bot` (the bot closed it as verified fixed), or how a
maintainer closed it: `completed`, `not_planned`, `duplicate`, `invalid` (labelled so). Precision counts the
maintainer-closed ones: those not closed as invalid, duplicate or not planned, over all a maintainer closed.
"""
from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Iterable

from harness.core.record import check_closed

from state.db import transaction
from state.runs import now

RESOLUTIONS = ("open", "fixed_by_bot", "completed", "not_planned", "duplicate", "invalid")
FALSE_POSITIVE = ("not_planned", "duplicate", "invalid")
BY_MAINTAINER = ("completed", *FALSE_POSITIVE)


@dataclass(frozen=True)
class Resolution:
    """One tracking issue as GitHub last showed it."""

    number: int
    key: str
    resolution: str
    state_reason: str | None = None
    reopened: bool = False

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"resolution": RESOLUTIONS}

    def __post_init__(self) -> None:
        check_closed(self, f"resolution of issue {self.number}")


@dataclass
class Tally:
    """The counts `flagsweep stats` prints and each summary issue shows."""

    repo: str | None
    opened: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {r: 0 for r in RESOLUTIONS})
    reopened: int = 0

    @property
    def closed_by_maintainer(self) -> int:
        return sum(self.counts[r] for r in BY_MAINTAINER)

    @property
    def precision(self) -> float | None:
        """Share of maintainer-closed issues not closed as invalid, duplicate or not planned (None: none closed)."""
        closed = self.closed_by_maintainer
        return None if closed == 0 else round(self.counts["completed"] / closed, 3)

    def verdicts(self) -> dict[str, Any]:
        """Only what maintainers decided (what summary issues show: the bot's own filing and closing never
        changes it, so publishing a run twice rewrites nothing)."""
        return {**{r: self.counts[r] for r in BY_MAINTAINER}, "closed": self.closed_by_maintainer,
                "precision": self.precision}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, the derived figures included."""
        return {**asdict(self), "closed_by_maintainer": self.closed_by_maintainer, "precision": self.precision}


def record(conn: sqlite3.Connection, repo: str, seen: Iterable[Resolution]) -> None:
    """Store what GitHub shows now (only rows that changed: a quiet publish writes nothing); `reopened` sticks."""
    at = now()
    have = {row["number"]: (row["key"], row["resolution"], row["state_reason"], bool(row["reopened"]))
            for row in conn.execute("SELECT * FROM issue_resolutions WHERE repo = ?", (repo,))}
    changed = [r for r in seen if not _unchanged(have.get(r.number), r)]
    if not changed:
        return
    with transaction(conn):
        for r in changed:
            if r.resolution not in RESOLUTIONS:
                raise ValueError(f"unknown resolution {r.resolution!r}")
            conn.execute(
                "INSERT INTO issue_resolutions (repo, number, key, resolution, state_reason, reopened, seen_at)"
                " VALUES (?,?,?,?,?,?,?) ON CONFLICT(repo, number) DO UPDATE SET key = excluded.key,"
                " resolution = excluded.resolution, state_reason = excluded.state_reason,"
                " reopened = MAX(reopened, excluded.reopened), seen_at = excluded.seen_at",
                (repo, r.number, r.key, r.resolution, r.state_reason, int(r.reopened), at))


def _unchanged(stored: tuple | None, r: Resolution) -> bool:
    return stored is not None and stored == (r.key, r.resolution, r.state_reason, r.reopened or stored[3])


def tally(conn: sqlite3.Connection, repo: str | None = None) -> Tally:
    """The counts over the bot's tracking issues (of `repo`, when given: compared case-insensitively, as GitHub
    compares repository names)."""
    sql, args = "SELECT resolution, reopened FROM issue_resolutions", []
    if repo is not None:
        sql += " WHERE lower(repo) = lower(?)"
        args.append(repo)
    out = Tally(repo=repo)
    for row in conn.execute(sql, args):
        out.opened += 1
        out.counts[row["resolution"]] += 1
        out.reopened += row["reopened"]
    return out
