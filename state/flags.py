"""Every flag, as stored: the config space of each build (every entry its torch's config modules declare, with
type and default, kept with the run's environment, and what changed since the build before); the config keys each
model's baseline read; the pruning audit's re-traced pairs; and the flag keys whose pruning an audit disagreement
turned off."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.calls import SCENARIOS
from harness.core.outcome import Outcome
from harness.core.run_environment import RunEnvironment
from state.db import transaction
from state.runs import environment_id, now


def record_space(conn: sqlite3.Connection, environment: RunEnvironment, modules: list[str],
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


def space_of_run(conn: sqlite3.Connection, run_id: int) -> tuple[list[str], dict[str, dict]] | None:
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
    mine = space_of_run(conn, run_id)
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
    theirs = space_of_run(conn, row[0])
    shared = set(mine[0]) & set(theirs[0])
    new = {k for k in mine[1] if _module_of(k, shared)}
    old = {k for k in theirs[1] if _module_of(k, shared)}
    return SpaceChange(row[1], tuple(sorted(new - old)), tuple(sorted(old - new)))


def _module_of(key: str, modules: set[str]) -> bool:
    return any(key.startswith(m + ".") for m in modules)



def record_reads(conn: sqlite3.Connection, run_id: int, model: str, reads: dict[str, Any]) -> None:
    """The config keys (with the values read) of one model's baseline compile in a run."""
    conn.execute("INSERT OR REPLACE INTO config_reads (run_id, model, reads) VALUES (?,?,?)",
                 (run_id, model, json.dumps(reads, sort_keys=True, default=repr)))


def reads(conn: sqlite3.Connection, run_id: int) -> dict[str, dict[str, Any]]:
    """{model: {key: value read}} of a run."""
    return {r[0]: json.loads(r[1]) for r in conn.execute("SELECT model, reads FROM config_reads WHERE run_id = ?",
                                                          (run_id,))}


def record_windows(conn: sqlite3.Connection, run_id: int, model: str, windows: dict[str, dict[str, Any]]) -> None:
    """The config keys (with the values read) of one model's baseline in a run, per call window."""
    conn.executemany("INSERT OR REPLACE INTO window_reads (run_id, model, window, reads) VALUES (?,?,?,?)",
                     [(run_id, model, window, json.dumps(found, sort_keys=True, default=repr))
                      for window, found in windows.items()])


def windows(conn: sqlite3.Connection, run_id: int, model: str) -> dict[str, dict[str, Any]]:
    """{window: {key: value read}} of one model's baseline in a run, in call order (empty: none recorded)."""
    rows = conn.execute("SELECT window, reads FROM window_reads WHERE run_id = ? AND model = ?", (run_id, model))
    found = {r[0]: json.loads(r[1]) for r in rows}
    return {w: found[w] for w in sorted(found, key=lambda w: SCENARIOS.index(w) if w in SCENARIOS else len(SCENARIOS))}


@dataclass(frozen=True)
class AnswerFinding:
    """One answered item the audit traced in full: where it disagreed (None: it agreed)."""

    model: str
    config: str
    disagreement: str | None


def record_answer_audit(conn: sqlite3.Connection, run_id: int, findings: Iterable[AnswerFinding]) -> None:
    """Store what the answered items' audit found."""
    with transaction(conn):
        conn.executemany("INSERT OR REPLACE INTO answer_audits (run_id, model, config, disagreement) VALUES (?,?,?,?)",
                         [(run_id, f.model, f.config, f.disagreement) for f in findings])


def answer_audit(conn: sqlite3.Connection, run_id: int) -> list[AnswerFinding]:
    """What the answered items' audit of `run_id` found, by config and model."""
    rows = conn.execute("SELECT model, config, disagreement FROM answer_audits WHERE run_id = ? ORDER BY config, model",
                        (run_id,))
    return [AnswerFinding(*r) for r in rows]


def record_answered(conn: sqlite3.Connection, run_id: int, model: str, config: str, rule: str | None,
                    answered: bool = True) -> None:
    """An item's later calls answered from the baseline by `rule` (`answered` False: the screen passed, but they
    were made in full); rule None: nothing to keep (an earlier answer dropped)."""
    if rule is None:
        conn.execute("DELETE FROM answered_items WHERE run_id = ? AND model = ? AND config = ?",
                     (run_id, model, config))
    else:
        conn.execute("INSERT OR REPLACE INTO answered_items (run_id, model, config, rule, answered) VALUES (?,?,?,?,?)",
                     (run_id, model, config, rule, int(answered)))


def answered(conn: sqlite3.Connection, run_id: int, *, screened: bool = False) -> dict[tuple[str, str], str]:
    """{(model, config): the rule that answered its later calls} of a run; `screened`: also the items the screen
    passed while answering was off."""
    rows = conn.execute("SELECT model, config, rule FROM answered_items WHERE run_id = ? AND answered >= ?",
                        (run_id, 0 if screened else 1))
    return {(r[0], r[1]): r[2] for r in rows}


@dataclass(frozen=True)
class Quarantine:
    """A config the audit found answered wrong: the rule is off for it that night and its next `nights`."""

    config: str
    run_id: int                 # the run whose audit found it
    night: str | None           # that run's nightly date
    nights: int
    why: str
    left: int                   # nights still to come under it, the current one included


def quarantine(conn: sqlite3.Connection, run_id: int, night: str | None, nights: int,
               findings: Iterable[AnswerFinding]) -> None:
    """Quarantine each config a finding disagreed on (the first disagreement of it names why)."""
    why: dict[str, str] = {}
    for f in findings:
        if f.disagreement:
            why.setdefault(f.config, f"{f.model}: {f.disagreement}")
    with transaction(conn):
        conn.executemany("INSERT OR REPLACE INTO answer_quarantine (run_id, night, config, nights, why) "
                         "VALUES (?,?,?,?,?)", [(run_id, night, c, nights, w) for c, w in why.items()])


def quarantined(conn: sqlite3.Connection, night: str | None, before: int | None = None) -> list[Quarantine]:
    """The configs under quarantine for a run of `night` (None: not a nightly): found by an earlier run (below
    `before`, when given: as of that run), with fewer than its `nights` nights run since, `night` not counted.
    Newest first, one per config."""
    below = before if before is not None else 2 ** 62
    rows = conn.execute("SELECT run_id, night, config, nights, why FROM answer_quarantine WHERE run_id < ?"
                        " ORDER BY run_id DESC", (below,)).fetchall()
    found: dict[str, Quarantine] = {}
    for run_id, found_night, config, nights, why in rows:
        if config in found:
            continue
        since = conn.execute("SELECT count(DISTINCT nightly) FROM runs WHERE id > ? AND id < ? AND nightly IS NOT NULL"
                             " AND nightly IS NOT ? AND nightly IS NOT ?",
                             (run_id, below, found_night, night)).fetchone()[0]
        if since < nights:
            found[config] = Quarantine(config, run_id, found_night, nights, why, nights - since)
    return list(found.values())


def disabled_keys(conn: sqlite3.Connection) -> set[str]:
    """Flag keys never pruned again."""
    return {r[0] for r in conn.execute("SELECT key FROM prune_disabled")}


@dataclass(frozen=True)
class AuditResult:
    """One pruned pair traced again: did the trace give the baseline's result, as pruning said it would?"""

    model: str
    config: str
    keys: tuple[str, ...]          # the config's flag keys
    baseline: Outcome
    traced: Outcome

    @property
    def agreed(self) -> bool:
        b, t = self.baseline, self.traced
        return (t.status, t.graphs, t.signature) == (b.status, b.graphs, b.signature)


def record_audit(conn: sqlite3.Connection, run_id: int, results: Iterable[AuditResult]) -> None:
    """Store each audited pair; a disagreement turns pruning off for the config's keys from now on."""
    with transaction(conn):
        for r in results:
            conn.execute("INSERT OR REPLACE INTO prune_audits (run_id, model, config, agreed, traced_status,"
                         " traced_graphs, traced_signature) VALUES (?,?,?,?,?,?,?)",
                         (run_id, r.model, r.config, int(r.agreed), r.traced.status, r.traced.graphs,
                          r.traced.signature))
            if not r.agreed:
                conn.executemany("INSERT OR IGNORE INTO prune_disabled (key, config, model, run_id, traced_status,"
                                 " traced_graphs, baseline_graphs, disabled_at) VALUES (?,?,?,?,?,?,?,?)",
                                 [(k, r.config, r.model, run_id, r.traced.status, r.traced.graphs,
                                   r.baseline.graphs, now()) for k in r.keys])


@dataclass(frozen=True)
class AuditSummary:
    """A run's audit: pairs re-traced, how many agreed, and the flags it turned pruning off for."""

    audited: int
    agreed: int
    turned_off: tuple[tuple[str, str, str], ...]    # (key, config, model) disabled by this run

    @property
    def agreement(self) -> float | None:
        """Percent of audited pairs that agreed, one decimal; None when nothing was audited."""
        return round(100.0 * self.agreed / self.audited, 1) if self.audited else None


def audit_summary(conn: sqlite3.Connection, run_id: int) -> AuditSummary:
    """What the audit of `run_id` found."""
    n, ok = conn.execute("SELECT count(*), coalesce(sum(agreed), 0) FROM prune_audits WHERE run_id = ?",
                         (run_id,)).fetchone()
    off = conn.execute("SELECT key, config, model FROM prune_disabled WHERE run_id = ? ORDER BY key", (run_id,))
    return AuditSummary(n, ok, tuple((r[0], r[1], r[2]) for r in off))
