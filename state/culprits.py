"""Commit ranges: a regression range's main-branch commits, its ranked suspects and its bisection, as stored.

One row per (config, mode, signature, good commit, bad commit): the cache a night's culprit search consults first, so a
range is bisected once whatever run or command asks again. A maintainer's `wrong-culprit` is kept on the row
(the culprit stays listed, marked wrong, and its cc is not applied). `cc_removed` holds the logins a person
took off an issue's cc, never added there again. Written by bot/ranges/culprit.py and bot/commands, read by
bot/view (the tracking issue) and `flagsweep stats`.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from harness.core.commits import Commit, FileChange, Person
from harness.core.record import check_closed, parse
from state.db import transaction
from state.runs import now

# outside: the change lies in a commit that is not Python; one_of: skips leave several candidates
STATUSES = ("found", "suspects", "cut", "flaky", "not_reproduced", "bounded", "failed", "outside", "one_of")
VERDICTS = ("old", "new", "flaky", "other")     # a probe: passes, fails with the signature, runs disagree, fails otherwise
PHASES = ("ends", "search", "retest")
BUILDS = ("good", "bad")                        # the build a probe laid a commit's Python over


@dataclass(frozen=True)
class SuspectRow:
    """One ranked suspect as stored: its commit's sha, score and the reasons."""

    sha: str
    score: int
    why: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeRow:
    """One probe of the overlay bisection: the commit, each run's answer ("ok" or a signature), the verdict."""

    sha: str
    runs: list[str]
    verdict: str                     # old | new | flaky | other
    phase: str = "search"            # ends | search | retest
    build: str = "good"              # the build the commit's Python was laid over: good | bad

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"verdict": VERDICTS, "phase": PHASES, "build": BUILDS}

    def __post_init__(self) -> None:
        check_closed(self, "probe")


@dataclass(frozen=True)
class Candidate:
    """A commit the bisection could not rule out, and why (skipped as untestable, or not Python)."""

    sha: str
    why: str


@dataclass(frozen=True)
class Bisection:
    """What an overlay bisection did and found; evidence: the re-test runs at the culprit and its parent."""

    culprit: str | None = None
    parent: str | None = None
    probes: list[ProbeRow] = field(default_factory=list)
    seconds: float = 0.0
    runs: int = 0                    # reproducer runs in all
    candidates: list[Candidate] = field(default_factory=list)   # one_of / outside: the commits left, with why
    likely_wrong: bool = False       # the culprit changes no file the reproducer imported (nobody is cc'd for it)
    fix: bool = False                # a fix's search (the first commit where the signature is gone)


@dataclass
class CommitRange:
    """One stored commit range."""

    signature: str
    good_git: str
    bad_git: str
    status: str
    commits: list[Commit] = field(default_factory=list)
    suspects: list[SuspectRow] = field(default_factory=list)
    bisection: Bisection | None = None
    reason: str | None = None
    wrong_by: str | None = None
    wrong_at: str | None = None
    recorded_at: str | None = None
    config: str = ""                 # the crash's config: its reproducer, its tracking issue (schema v21)
    mode: str = ""                   # the crash's mode (Mode.key, '' for eval): its reproducer runs in it (v25)

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, "commit range")

    @property
    def culprit(self) -> Commit | None:
        """The bisected commit, when one was found (`wrong_by` says whether a maintainer said it is wrong)."""
        sha = self.bisection.culprit if self.bisection and self.status == "found" else None
        return next((c for c in self.commits if c.sha == sha), None) if sha else None

    def commit(self, sha: str) -> Commit | None:
        """A commit of the range by sha."""
        return next((c for c in self.commits if c.sha == sha), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (`flagsweep culprit --json`)."""
        return asdict(self)


def _commit(data: dict[str, Any]) -> Commit:
    found = parse(Commit, data, "Commit")
    return replace(found, files=tuple(parse(FileChange, f, "FileChange") for f in found.files),
                   coauthors=tuple(parse(Person, p, "Person") for p in found.coauthors),
                   approvers=tuple(found.approvers))


def _bisection(text: str | None) -> Bisection | None:
    if text is None:
        return None
    found = parse(Bisection, json.loads(text), "Bisection")
    return replace(found, probes=[parse(ProbeRow, p, "ProbeRow") for p in found.probes],
                   candidates=[parse(Candidate, c, "Candidate") for c in found.candidates])


def _row(row: sqlite3.Row) -> CommitRange:
    return CommitRange(signature=row["signature"], good_git=row["good_git"], bad_git=row["bad_git"],
                       status=row["status"], commits=[_commit(c) for c in json.loads(row["commits"])],
                       suspects=[parse(SuspectRow, s, "SuspectRow") for s in json.loads(row["suspects"])],
                       bisection=_bisection(row["bisection"]), reason=row["reason"], wrong_by=row["wrong_by"],
                       wrong_at=row["wrong_at"], recorded_at=row["recorded_at"], config=row["config"],
                       mode=row["mode"])


def record(conn: sqlite3.Connection, r: CommitRange) -> None:
    """Store (or replace) one commit range."""
    check_closed(r, "commit range")        # a status set after it was made is checked here
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO commit_ranges (config, mode, signature, good_git, bad_git, status, commits,"
            " suspects, bisection, reason, wrong_by, wrong_at, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r.config, r.mode, r.signature, r.good_git, r.bad_git, r.status, json.dumps([asdict(c) for c in r.commits]),
             json.dumps([asdict(s) for s in r.suspects]),
             json.dumps(asdict(r.bisection)) if r.bisection else None, r.reason, r.wrong_by, r.wrong_at, now()))


def get(conn: sqlite3.Connection, signature: str, good_git: str, bad_git: str, config: str = "",
        mode: str = "") -> CommitRange | None:
    """The stored commit range of (config, mode, signature, good, bad), or None (mode: Mode.key, '' for eval)."""
    row = conn.execute("SELECT * FROM commit_ranges WHERE config = ? AND mode = ? AND signature = ? AND good_git = ?"
                       " AND bad_git = ?", (config, mode, signature, good_git, bad_git)).fetchone()
    return _row(row) if row else None


def for_signatures(conn: sqlite3.Connection, signatures: list[str]) -> dict[str, list[CommitRange]]:
    """{signature: its stored commit ranges, newest first}."""
    out: dict[str, list[CommitRange]] = {}
    for sig in dict.fromkeys(signatures):
        rows = conn.execute("SELECT * FROM commit_ranges WHERE signature = ? ORDER BY recorded_at DESC", (sig,))
        out[sig] = [_row(r) for r in rows.fetchall()]
    return out


def mark_wrong(conn: sqlite3.Connection, config: str, signature: str, by: str, mode: str = "") -> CommitRange | None:
    """Record a maintainer's "wrong culprit" on the newest found range of (config, mode, signature); the range, or
    None."""
    row = conn.execute("SELECT * FROM commit_ranges WHERE config = ? AND mode = ? AND signature = ? AND"
                       " status = 'found' AND wrong_by IS NULL ORDER BY recorded_at DESC LIMIT 1",
                       (config, mode, signature)).fetchone()
    if row is None:
        return None
    with transaction(conn):
        conn.execute("UPDATE commit_ranges SET wrong_by = ?, wrong_at = ? WHERE config = ? AND mode = ? AND"
                     " signature = ? AND good_git = ? AND bad_git = ?",
                     (by, now(), config, mode, signature, row["good_git"], row["bad_git"]))
    return get(conn, signature, row["good_git"], row["bad_git"], config, mode)


def wrong_count(conn: sqlite3.Connection) -> tuple[int, int]:
    """(culprits named, of them marked wrong by a maintainer)."""
    row = conn.execute("SELECT count(*), count(wrong_by) FROM commit_ranges WHERE status = 'found'").fetchone()
    return row[0], row[1]


def remove_cc(conn: sqlite3.Connection, key: str, logins: list[str]) -> None:
    """Remember that these logins were taken off the issue `key`'s cc: never cc'd there again."""
    with transaction(conn):
        conn.executemany("INSERT OR IGNORE INTO cc_removed (key, login, at) VALUES (?,?,?)",
                         [(key, login.lstrip("@").lower(), now()) for login in logins])


def removed(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    """{issue key: the logins removed from its cc (lower case)}."""
    out: dict[str, set[str]] = {}
    for key, login in conn.execute("SELECT key, login FROM cc_removed"):
        out.setdefault(key, set()).add(login)
    return {k: frozenset(v) for k, v in out.items()}
