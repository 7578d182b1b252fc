"""The nightly's environment gate as stored: per run, `ok` or `environment_suspect` with the reasons.

The rule that decides it is bot.pipeline.gate's; this module only keeps the verdict. A suspect run is
stored and reported but never a "previous comparable night" (state.history skips it) and files nothing.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from harness.core.record import check_closed

from state.db import transaction
from state.runs import now

OK, SUSPECT = "ok", "environment_suspect"


@dataclass
class EnvironmentVerdict:
    """One run's gate verdict; `reasons` are {kind: check | canary | jump, ...} dicts the templates word."""

    run_id: int
    verdict: str = OK
    reasons: list[dict[str, Any]] = field(default_factory=list)
    checked_at: str | None = None

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"verdict": (OK, SUSPECT)}

    def __post_init__(self) -> None:
        check_closed(self, "environment verdict")

    @property
    def suspect(self) -> bool:
        return self.verdict == SUSPECT

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def record(conn: sqlite3.Connection, gate: EnvironmentVerdict) -> EnvironmentVerdict:
    """Store (or replace) the run's verdict; returns it with its time."""
    gate.checked_at = now()
    with transaction(conn):
        conn.execute("INSERT OR REPLACE INTO run_gates (run_id, verdict, reasons, checked_at) VALUES (?,?,?,?)",
                     (gate.run_id, gate.verdict, json.dumps(gate.reasons, sort_keys=True), gate.checked_at))
    return gate


def get(conn: sqlite3.Connection, run_id: int) -> EnvironmentVerdict | None:
    """The run's stored verdict, or None when the gate never ran on it."""
    row = conn.execute("SELECT * FROM run_gates WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    return EnvironmentVerdict(run_id=row["run_id"], verdict=row["verdict"], reasons=json.loads(row["reasons"]),
                checked_at=row["checked_at"])


def is_suspect(conn: sqlite3.Connection, run_id: int) -> bool:
    """Whether the run was marked environment_suspect."""
    gate = get(conn, run_id)
    return gate is not None and gate.suspect
