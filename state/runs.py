"""Runs, environments and outcomes: what the sweep engine writes as each item finishes."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from functools import lru_cache
from itertools import islice
from typing import Any, ClassVar, Iterable, Iterator

from harness.core.model_build import ModelBuild
from harness.core.names import check_model
from harness.core.modes import Mode
from harness.core.options import RunOptions
from harness.core.run_environment import RunEnvironment
from harness.core.outcome import Outcome
from harness.core.record import RecordError, check_closed, parse
from state.db import latest_rows, transaction

log = logging.getLogger(__name__)

# What a run is (which listings show it) and how it stands.
KINDS = ("sweep", "nightly", "baseline", "command")
STATUSES = ("running", "finished", "interrupted", "failed", "merged")


def is_date(text: Any) -> bool:
    """A calendar date written YYYY-MM-DD (a nightly's name)."""
    if not isinstance(text, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text, re.ASCII):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def now() -> str:
    """UTC timestamp, ISO 8601, seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Run:
    """One stored run."""

    id: int
    kind: str
    status: str
    started_at: str
    finished_at: str | None
    models: list[str]
    configs: dict[str, dict[str, Any]]
    base_settings: dict[str, Any]
    options: RunOptions
    environment: RunEnvironment
    reason: str | None = None
    nightly: str | None = None
    shard: str | None = None
    # Configs set aside because the torch under test lacks a key: name -> {"settings", "missing"}.
    unavailable: dict[str, dict[str, Any]] = field(default_factory=dict)

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"kind": KINDS, "status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, f"run {self.id}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**self.__dict__, "options": self.options.to_dict(), "environment": self.environment.to_dict()}


def environment_id(conn: sqlite3.Connection, env: RunEnvironment) -> int:
    """Store an environment once and return its id."""
    data = json.dumps(env.to_dict(), sort_keys=True)
    key = hashlib.sha256(data.encode()).hexdigest()[:32]
    row = conn.execute("SELECT id FROM environments WHERE key = ?", (key,)).fetchone()
    if row:
        return row[0]
    cur = conn.execute(
        "INSERT INTO environments (key, torch_version, torch_git, transformers_version, python_version,"
        " device, cuda_version, flagsweep_version, recipe_fingerprint, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (key, env.torch_version, env.torch_git, env.transformers_version, env.python_version, env.device,
         env.cuda_version, env.flagsweep_version, env.recipe_fingerprint, data),
    )
    return cur.lastrowid


def create_run(conn: sqlite3.Connection, *, environment: RunEnvironment, models: list[str],
               configs: dict[str, dict[str, Any]], base_settings: dict[str, Any] | None = None,
               options: RunOptions = RunOptions(), kind: str = "sweep",
               nightly: str | None = None, shard: str | None = None,
               unavailable: dict[str, dict[str, Any]] | None = None) -> int:
    """Start a run; returns its id. `unavailable` configs are kept with the run's options."""
    env_id = environment_id(conn, environment)
    options = dataclasses.replace(options, unavailable_configs=unavailable) if unavailable else options
    cur = conn.execute(
        "INSERT INTO runs (kind, environment_id, started_at, models, configs, base_settings, options, nightly, shard)"
        " VALUES (?,?,?,?,?,?,?,?,?)",
        (kind, env_id, now(), json.dumps(models), json.dumps(configs, sort_keys=True),
         json.dumps(base_settings or {}, sort_keys=True), json.dumps(options.to_dict(), sort_keys=True),
         nightly, shard),
    )
    return cur.lastrowid


def record_outcome(conn: sqlite3.Connection, run_id: int, outcome: Outcome) -> None:
    """Write one finished item (replacing an earlier attempt of the same item)."""
    conn.execute(
        "INSERT OR REPLACE INTO outcomes (run_id, model, config, status, graphs, signature, fingerprint, data,"
        " recorded_at, gb_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (run_id, outcome.model, outcome.config, outcome.status, outcome.graphs, outcome.signature,
         outcome.fingerprint, json.dumps(outcome.to_dict()), now(), outcome.gb_id),
    )
    _record_breaks(conn, run_id, outcome)


def _record_breaks(conn: sqlite3.Connection, run_id: int, outcome: Outcome) -> None:
    """Each graph-break reason of the item with its registry id, replacing an earlier attempt's."""
    conn.execute("DELETE FROM graph_breaks WHERE run_id = ? AND model = ? AND config = ?",
                 (run_id, outcome.model, outcome.config))
    ids = list(outcome.break_ids) + [None] * (len(outcome.break_reasons) - len(outcome.break_ids))
    conn.executemany(
        "INSERT INTO graph_breaks (run_id, model, config, position, reason, gb_id) VALUES (?,?,?,?,?,?)",
        [(run_id, outcome.model, outcome.config, i, reason, gb_id)
         for i, (reason, gb_id) in enumerate(zip(outcome.break_reasons, ids))])


def graph_breaks(conn: sqlite3.Connection, run_id: int) -> list[tuple[str, str, str, str | None]]:
    """(model, config, reason, gb_id) of every graph break recorded for a run, in order."""
    rows = conn.execute("SELECT model, config, reason, gb_id FROM graph_breaks WHERE run_id = ?"
                        " ORDER BY model, config, position", (run_id,))
    return [(r[0], r[1], r[2], r[3]) for r in rows]


@dataclass(frozen=True)
class ExportedRun:
    """A run as another host exported it (bot.pipeline.merge's file): foreign input, read strictly before any of it
    is stored (an unknown or missing field, a kind or status outside its set, an environment that does not read)."""

    kind: str
    status: str
    started_at: str
    finished_at: str | None
    reason: str | None
    nightly: str | None
    shard: str | None
    models: list[str]
    configs: dict[str, dict[str, Any]]
    base_settings: dict[str, Any]
    options: RunOptions
    environment: RunEnvironment

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"kind": KINDS, "status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, "run")
        for model in self.models:
            check_model(model, "run.models")
        if self.nightly is not None and not is_date(self.nightly):
            raise RecordError(f"run: nightly {self.nightly!r} is not a date YYYY-MM-DD")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExportedRun":
        """Read the exported form; RecordError naming the field."""
        if isinstance(data, dict) and "environment" in data:
            data = {**data, "environment": RunEnvironment.from_dict(data["environment"])}
        if isinstance(data, dict) and "options" in data:
            try:
                data = {**data, "options": RunOptions.from_dict(data["options"])}
            except RecordError as exc:
                raise RecordError(f"run.options: {exc}") from None
        return parse(cls, data, "run")


def import_run(conn: sqlite3.Connection, run: ExportedRun, outcomes_: list[Outcome],
               builds: Iterable[ModelBuild], origin: str) -> int:
    """Store a run exported elsewhere (a shard from another host), read strictly, as it was; returns its new id here.

    `origin` (a hash of the file) is kept in the run's options: importing the same file
    again returns the run already imported instead of a copy.
    """
    row = conn.execute("SELECT id FROM runs WHERE json_extract(options, '$.imported_from') = ?", (origin,)).fetchone()
    if row:
        return row[0]
    with transaction(conn):
        options = dataclasses.replace(run.options, imported_from=origin)
        cur = conn.execute(
            "INSERT INTO runs (kind, environment_id, started_at, finished_at, status, reason, models, configs,"
            " base_settings, options, nightly, shard) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (run.kind, environment_id(conn, run.environment), run.started_at, run.finished_at, run.status, run.reason,
             json.dumps(run.models), json.dumps(run.configs, sort_keys=True),
             json.dumps(run.base_settings, sort_keys=True), json.dumps(options.to_dict(), sort_keys=True), run.nightly,
             run.shard))
        run_id = cur.lastrowid
        for outcome in outcomes_:
            record_outcome(conn, run_id, outcome)
        for build in builds:
            record_model(conn, run_id, build)
    return run_id


def record_model(conn: sqlite3.Connection, run_id: int, build: ModelBuild) -> None:
    """Store what a reproducer needs for one model of a run (its build, as the worker made it)."""
    conn.execute("INSERT OR REPLACE INTO run_models (run_id, model, data) VALUES (?,?,?)",
                 (run_id, build.model, json.dumps(build.to_dict(), sort_keys=True)))


def model_data(conn: sqlite3.Connection, run_id: int) -> dict[str, ModelBuild]:
    """{model: its stored build} for a run."""
    rows = conn.execute("SELECT model, data FROM run_models WHERE run_id = ? ORDER BY model", (run_id,))
    return {r[0]: ModelBuild.from_dict(json.loads(r[1])) for r in rows}


def group_model_data(conn: sqlite3.Connection, run_ids: list[int]) -> dict[str, ModelBuild]:
    """{model: its stored build} over several runs (the shards of one nightly); later runs win."""
    out: dict[str, ModelBuild] = {}
    for rid in run_ids:
        out.update(model_data(conn, rid))
    return out


def finished_items(conn: sqlite3.Connection, run_id: int) -> set[tuple[str, str]]:
    """(model, config) pairs already recorded for a run: what --resume skips."""
    rows = conn.execute("SELECT model, config FROM outcomes WHERE run_id = ?", (run_id,))
    return {(r[0], r[1]) for r in rows}


def finish_run(conn: sqlite3.Connection, run_id: int, status: str = "finished", reason: str | None = None) -> None:
    """Mark a run finished, interrupted or failed."""
    conn.execute("UPDATE runs SET status = ?, finished_at = ?, reason = ? WHERE id = ?",
                 (status, now(), reason, run_id))


def outcomes(conn: sqlite3.Connection, run_id: int) -> list[Outcome]:
    """All outcomes of a run, in a stable order."""
    rows = conn.execute("SELECT data FROM outcomes WHERE run_id = ? ORDER BY model, config", (run_id,))
    return [Outcome.from_dict(json.loads(r[0])) for r in rows]


def mark_merged(conn: sqlite3.Connection, run_id: int, into: int) -> None:
    """Mark a shard run as merged into run `into` (kept out of history from now on)."""
    conn.execute("UPDATE runs SET status = 'merged', reason = ? WHERE id = ?", (f"merged into run {into}", run_id))


def status_counts(conn: sqlite3.Connection, run_ids: list[int]) -> dict[str, int]:
    """{status: number of outcomes} over the given runs."""
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    return dict(conn.execute(
        f"SELECT status, count(*) FROM outcomes WHERE run_id IN ({marks}) GROUP BY status", run_ids).fetchall())


def find_outcome(conn: sqlite3.Connection, run_ids: list[int], model: str, config: str) -> tuple[int, Outcome] | None:
    """The outcome of one item among `run_ids` (the newest run first), with the id of the run holding it."""
    if not run_ids:
        return None
    row = conn.execute(
        f"SELECT run_id, data FROM outcomes WHERE run_id IN ({','.join('?' * len(run_ids))}) AND model = ?"
        " AND config = ? ORDER BY run_id DESC", (*run_ids, model, config)).fetchone()
    return (row[0], Outcome.from_dict(json.loads(row[1]))) if row else None


_RUN_SQL = ("SELECT r.*, e.data AS env FROM runs r LEFT JOIN environments e ON e.id = r.environment_id")


class UnreadableRun(RuntimeError):
    """A stored run that cannot be read (its environment row, say, written by another flagsweep or damaged): asked
    for by id, an error naming it; in a listing, left out with one warning naming it (`_readable`)."""

    def __init__(self, run_id: int, why: str) -> None:
        super().__init__(f"run {run_id} cannot be read: {why}")
        self.run_id = run_id


def _run(row: sqlite3.Row) -> Run:
    """The run of a row; UnreadableRun naming it when a field does not parse (its environment, its JSON)."""
    try:
        return _parsed(row)
    except (ValueError, TypeError) as exc:      # RecordError, a JSON decode error, a field of the wrong type
        raise UnreadableRun(row["id"], str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _readable(conn: sqlite3.Connection, rows: Iterable[sqlite3.Row]) -> Iterator[Run]:
    """The runs of `rows` that can be read; each one that cannot is left out, named once in a warning (a listing
    goes on with the others: one damaged row never hides the rest of the history)."""
    for row in rows:
        try:
            yield _run(row)
        except UnreadableRun as exc:
            _left_out(_store_name(conn), str(exc))


@lru_cache(maxsize=1024)
def _left_out(store: str, message: str) -> None:
    """One warning per store and run (a command may list the runs several times)."""
    log.warning("%s; left out", message)


def _store_name(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else ""


def _parsed(row: sqlite3.Row) -> Run:
    keys = row.keys()
    options = RunOptions.from_dict(json.loads(row["options"]))
    return Run(
        id=row["id"], kind=row["kind"], status=row["status"], started_at=row["started_at"],
        finished_at=row["finished_at"], models=json.loads(row["models"]), configs=json.loads(row["configs"]),
        base_settings=json.loads(row["base_settings"]), options=options,
        environment=RunEnvironment.from_dict(json.loads(row["env"]) if row["env"] else {}), reason=row["reason"],
        nightly=row["nightly"] if "nightly" in keys else None, shard=row["shard"] if "shard" in keys else None,
        unavailable=options.unavailable_configs,
    )


def get_run(conn: sqlite3.Connection, run_id: int) -> Run | None:
    """One run, or None; UnreadableRun naming it when it cannot be read."""
    row = conn.execute(_RUN_SQL + " WHERE r.id = ?", (run_id,)).fetchone()
    return _run(row) if row else None


def list_runs(conn: sqlite3.Connection, *, limit: int = 50, kinds: Iterable[str] | None = None,
              status: str | None = None) -> list[Run]:
    """The latest `limit` runs that can be read, newest first (every match is read: an unreadable one left out
    does not shorten the listing)."""
    kinds = list(kinds or [])
    rows = latest_rows(conn, _RUN_SQL, [(f"r.kind IN ({','.join('?' * len(kinds))})", kinds),
                                        ("r.status = ?", [status] if status else [])], -1, order="r.id")
    return list(islice(_readable(conn, rows), limit))


def finished_runs(conn: sqlite3.Connection, kinds: Iterable[str], before_id: int | None = None) -> Iterator[Run]:
    """Finished runs of `kinds`, newest first (those before run `before_id` when given), lazily."""
    kinds = list(kinds)
    sql = _RUN_SQL + f" WHERE r.status = 'finished' AND r.kind IN ({','.join('?' * len(kinds))})"
    args: list[Any] = list(kinds)
    if before_id is not None:
        sql += " AND r.id < ?"
        args.append(before_id)
    sql += " ORDER BY r.id DESC"
    yield from _readable(conn, conn.execute(sql, args).fetchall())


MODE_SQL = "json_extract(options, '$.mode')"   # a run's stored mode in SQL (NULL: eval, stored without one)


def mode_key(stored: str | None) -> str:
    """The key (harness.core.modes.Mode.key) of a run's stored mode as MODE_SQL reads it: '' for eval."""
    return Mode.from_dict(json.loads(stored)).key if stored else ""
