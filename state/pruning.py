"""Read-set pruning as stored: the config keys each model's baseline read, the audit's re-traced pairs, and
the flag keys whose pruning an audit disagreement turned off."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.outcome import Outcome
from state.db import transaction
from state.runs import now


def record_reads(conn: sqlite3.Connection, run_id: int, model: str, reads: dict[str, Any]) -> None:
    """The config keys (with the values read) of one model's baseline compile in a run."""
    conn.execute("INSERT OR REPLACE INTO config_reads (run_id, model, reads) VALUES (?,?,?)",
                 (run_id, model, json.dumps(reads, sort_keys=True, default=repr)))


def reads(conn: sqlite3.Connection, run_id: int) -> dict[str, dict[str, Any]]:
    """{model: {key: value read}} of a run."""
    return {r[0]: json.loads(r[1]) for r in conn.execute("SELECT model, reads FROM config_reads WHERE run_id = ?",
                                                          (run_id,))}


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
