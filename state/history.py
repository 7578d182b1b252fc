"""Run history: effects per run, signatures over time (a crash's, and a wrong result's:
harness.core.correctness.wrong_signature), and which runs compare.

A *run group* is what people think of as one run: a plain sweep is a group of
one; the shards of one nightly (same `nightly` date, `shard` set) are one group.
Everything here that reads "a run" reads its whole group.
"""
from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.correctness import first_wrong, is_wrong_signature, wrong_signature
from harness.core.effects import effects_for
from harness.core.outcome import CRASH_STATUSES, Effect, Outcome
from harness.core.record import parse
from state import gates, runs as runs_mod
from state.db import transaction
from state.runs import Run

# Kinds of run whose results describe the corpus; `confirm` runs only re-check items.
HISTORY_KINDS = ("sweep", "nightly", "command")
EXAMPLE_MESSAGE_CHARS = 4000


def run_group(conn: sqlite3.Connection, run_id: int) -> list[int]:
    """Ids of the runs that form one logical run with `run_id`: the shards of one nightly and split, the latest run
    of each shard (a shard swept again replaces its earlier run; a run that did not fail is a replacement).

    A shard run that a later one replaced is a group of its own: it is history, no longer part of the nightly.
    """
    row = conn.execute("SELECT kind, nightly, shard FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return []
    if not row["nightly"] or not row["shard"]:
        return [run_id]
    split = row["shard"].partition("/")[2]
    rows = conn.execute(
        "SELECT id, shard FROM runs WHERE kind = ? AND nightly = ? AND shard LIKE ? AND (status != 'failed' OR id = ?)"
        " ORDER BY id", (row["kind"], row["nightly"], f"%/{split}", run_id))
    latest = {shard: rid for rid, shard in rows}
    if latest[row["shard"]] != run_id:
        return [run_id]
    return sorted(latest.values())


def group_outcomes(conn: sqlite3.Connection, run_id: int) -> list[Outcome]:
    """All outcomes of the run's group, sorted by (model, config)."""
    out: list[Outcome] = []
    for rid in run_group(conn, run_id):
        out.extend(runs_mod.outcomes(conn, rid))
    out.sort(key=lambda o: (o.model, o.config))
    return out


def models_of(conn: sqlite3.Connection, run: Run) -> set[str]:
    """The model set of a loaded run's group (no read at all for a run that is its own group)."""
    if not (run.nightly and run.shard):
        return set(run.models)
    return group_models(conn, run.id)


def group_models(conn: sqlite3.Connection, run_id: int) -> set[str]:
    """The model set of the run's group."""
    models: set[str] = set()
    for rid in run_group(conn, run_id):
        run = runs_mod.get_run(conn, rid)
        if run:
            models.update(run.models)
    return models


def run_date(run: Run) -> str:
    """The date a run speaks for: its nightly date when set, else its start time."""
    return run.nightly or run.started_at


def finalize_run(conn: sqlite3.Connection, run_id: int) -> None:
    """Compute and store the run's effects (the graph effect, and the correctness and recompile effects judged on the
    calls), and fold its crashes into the signature history."""
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        raise KeyError(f"no run {run_id}")
    outs = runs_mod.outcomes(conn, run_id)
    effs = effects_for(outs)
    with transaction(conn):
        conn.execute("DELETE FROM effects WHERE run_id = ?", (run_id,))
        conn.executemany(
            "INSERT INTO effects (run_id, model, config, stratum, effect, baseline_graphs, config_graphs,"
            " baseline_signature, config_signature, reason, correctness, recompile) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(run_id, e.model, e.config, e.stratum, e.effect, e.baseline_graphs, e.config_graphs,
              e.baseline_signature, e.config_signature, e.reason, e.correctness, e.recompile) for e in effs],
        )
        _update_signatures(conn, run, outs)


_CRASHED = "(" + ",".join(f"'{s}'" for s in CRASH_STATUSES) + ")"  # as SQL


def _signature_keys(outs: Iterable[Outcome]) -> set[tuple[str, str]]:
    """(config, signature) of every crashed outcome, flaky or not, and of every wrong result (its first wrong call)."""
    crashes = {(o.config, o.signature) for o in outs if o.crashed and o.signature}
    return crashes | {(o.config, wrong_signature(w)) for o in outs if (w := first_wrong(o.calls)) is not None}


def _wrong_signature_of(o: Outcome) -> str | None:
    wrong = first_wrong(o.calls)
    return wrong_signature(wrong) if wrong is not None else None


def _update_signatures(conn: sqlite3.Connection, run: Run, outs: list[Outcome]) -> None:
    """Recompute the history row of each (config, signature) this run touched.

    Rows are rebuilt from the stored outcomes rather than incremented, so that
    finalizing twice, finalizing shards in any order, or an older run finalized
    late all give the same answer. Flaky outcomes are not believed yet.
    """
    for config, sig in sorted(_signature_keys(outs)):
        refresh_signature(conn, config, sig, run.options.sweep.mode.key)


_SIGNED = ("SELECT r.id AS run_id, COALESCE(r.nightly, r.started_at) AS date, o.model, o.data,"
           " json_extract(r.options, '$.mode') AS mode FROM outcomes o"   # runs_mod.MODE_SQL of r
           " JOIN runs r ON r.id = o.run_id WHERE o.config = ? AND r.kind IN ("
           + ",".join(f"'{k}'" for k in HISTORY_KINDS) + ") AND json_extract(o.data, '$.flaky_rate') IS NULL")
# A wrong result: an item that compiled and made a call whose outputs were wrong (its signature is then read from the
# calls in Python: the first wrong call names it).
_WRONG = (" AND o.status = 'ok' AND EXISTS (SELECT 1 FROM json_each(o.data, '$.calls') c"
          " WHERE json_extract(c.value, '$.accuracy') = 'wrong')")


def _signature_rows(conn: sqlite3.Connection, config: str, sig: str, mode: str) -> list[sqlite3.Row]:
    """The non-flaky outcomes on record with `sig` in runs of `mode` (its key): crashes with it, or wrong results whose
    first wrong call names it."""
    if not is_wrong_signature(sig):
        rows = conn.execute(_SIGNED + f" AND o.signature = ? AND o.status IN {_CRASHED}", (config, sig)).fetchall()
    else:
        rows = [r for r in conn.execute(_SIGNED + _WRONG, (config,))
                if _wrong_signature_of(Outcome.from_dict(json.loads(r["data"]))) == sig]
    return [r for r in rows if runs_mod.mode_key(r["mode"]) == mode]


def refresh_signature(conn: sqlite3.Connection, config: str, sig: str, mode: str = "") -> None:
    """Rebuild one signatures row of a mode (its key: '' for eval) from every non-flaky crash (or wrong result) on
    record in that mode's runs (deleting it if none is left)."""
    rows = _signature_rows(conn, config, sig, mode)
    if not rows:
        conn.execute("DELETE FROM signatures WHERE config = ? AND mode = ? AND signature = ?", (config, mode, sig))
        return
    dates = sorted({r["date"] for r in rows})
    first, last = dates[0], dates[-1]
    first_run = min(r["run_id"] for r in rows if r["date"] == first)
    latest = [r for r in rows if r["date"] == last]
    last_run = max(r["run_id"] for r in latest)
    examples = [Outcome.from_dict(json.loads(r["data"])) for r in latest]
    # An example with a message beats one without (timeouts carry none); then the first model by name.
    example = min(examples, key=lambda o: (not o.error_message, o.model))
    message = (example.error_message or _wrong_detail(example) or "")[:EXAMPLE_MESSAGE_CHARS] or None
    conn.execute(
        "INSERT OR REPLACE INTO signatures (config, mode, signature, first_run, last_run, first_seen, last_seen,"
        " nightlies_seen, models, error_type, torch_frame, example_message) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (config, mode, sig, first_run, last_run, first, last, len(dates), json.dumps(sorted({r["model"] for r in latest})),
         example.error_type, example.torch_frame, message),
    )


def _wrong_detail(o: Outcome) -> str | None:
    """A wrong result's example message: what differs on its first wrong call."""
    wrong = first_wrong(o.calls)
    return wrong.detail if wrong is not None else None


def effects(conn: sqlite3.Connection, run_id: int) -> list[Effect]:
    """Stored effects of the run's group, sorted by (config, model)."""
    ids = run_group(conn, run_id)
    if not ids:
        return []
    rows = conn.execute(
        f"SELECT * FROM effects WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY config, model", ids)
    return [Effect(model=r["model"], stratum=r["stratum"], config=r["config"], effect=r["effect"],
                   baseline_graphs=r["baseline_graphs"], config_graphs=r["config_graphs"],
                   baseline_signature=r["baseline_signature"], config_signature=r["config_signature"],
                   reason=r["reason"], correctness=r["correctness"], recompile=r["recompile"])
            for r in rows]


@dataclass(frozen=True)
class SignatureRow:
    """One known (config, signature) as the `signatures` table keeps it: where it was first and last seen (runs,
    and nightly dates or start times), on how many nightlies, its latest models and an example of its error."""

    config: str
    signature: str
    first_run: int | None
    last_run: int | None
    first_seen: str | None
    last_seen: str | None
    nightlies_seen: int
    models: tuple[str, ...]          # the latest run's (stored as a JSON list)
    error_type: str | None
    torch_frame: str | None
    example_message: str | None
    mode: str = ""                   # the mode's key (harness.core.modes.Mode.key): '' for eval


def signature_history(conn: sqlite3.Connection, config: str | None = None, mode: str = "") -> list[SignatureRow]:
    """Every known (config, signature) of one mode (its key: '' for eval) with first/last seen, nightlies seen and
    latest models."""
    sql, args = "SELECT * FROM signatures WHERE mode = ?", [mode]
    if config is not None:
        sql += " AND config = ?"
        args.append(config)
    sql += " ORDER BY config, last_seen DESC, signature"
    return [parse(SignatureRow, {**dict(r), "models": tuple(json.loads(r["models"]))}, "stored signature")
            for r in conn.execute(sql, args)]


def _asked(run: Run) -> set[str]:
    """The configs a run was asked for: those swept and those its torch lacked a key of."""
    return set(run.configs) | set(run.unavailable)


def _is_comparable(a: Run, a_models: set[str], b: Run, b_models: set[str]) -> bool:
    # A config that one torch lacks (a nightly that renamed a flag) must not cut the history of the others.
    same = set(a.configs) == set(b.configs) or _asked(a) == _asked(b)
    # Each mode has its own baseline and its own history: a train run never diffs against an eval one.
    same_mode = a.options.sweep.mode.axes == b.options.sweep.mode.axes
    return same and same_mode and bool(a_models & b_models)


def _group_key(run: Run) -> tuple:
    return ("nightly", run.kind, run.nightly) if run.nightly and run.shard else ("run", run.id)


def previous_comparable_run(conn: sqlite3.Connection, run_id: int) -> int | None:
    """The latest earlier finished run with the same config names and overlapping models (see `previous_comparable`)."""
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        return None
    prev = previous_comparable(conn, run, models_of(conn, run))
    return prev.id if prev else None


def previous_comparable(conn: sqlite3.Connection, run: Run, models: set[str]) -> Run | None:
    """The latest earlier finished run with the same config names (swept, or asked for) and overlapping models.

    Shards of one nightly count as one run (their highest id stands for the group).
    A nightly is compared with nightlies only, so an ad-hoc sweep never hides last night.
    """
    kinds = ("nightly",) if run.kind == "nightly" else HISTORY_KINDS
    earliest_own = min(run_group(conn, run.id))
    seen: set[tuple] = {_group_key(run)}    # a shard's earlier, replaced runs are the same nightly, never the previous one
    for cand in runs_mod.finished_runs(conn, kinds, before_id=earliest_own):
        key = _group_key(cand)
        if key in seen:
            continue
        seen.add(key)
        if gates.is_suspect(conn, cand.id):
            continue                        # a broken environment's night is never the one to compare with
        if _is_comparable(run, models, cand, models_of(conn, cand)):
            stand_in = max(run_group(conn, cand.id))
            return cand if stand_in == cand.id else runs_mod.get_run(conn, stand_in)
    return None


def latest_runs(conn: sqlite3.Connection, n: int, *, kinds: Iterable[str] = HISTORY_KINDS) -> list[Run]:
    """The latest `n` finished runs, newest first, one per group (shards collapse to their highest id)."""
    out: list[Run] = []
    seen: set[tuple] = set()
    for run in runs_mod.finished_runs(conn, kinds):
        key = _group_key(run)
        if key in seen:
            continue
        seen.add(key)
        out.append(run)
        if len(out) >= n:
            break
    return out


def latest_comparable_pair(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """(older, newer): the newest finished run and its previous comparable run, if any."""
    for run in latest_runs(conn, 50):
        prev = previous_comparable_run(conn, run.id)
        if prev is not None:
            return prev, run.id
    return None


def effect_counts(conn: sqlite3.Connection, run_ids: list[int], *,
                  whole_group: bool = True) -> dict[int, dict[str, Counter[str]]]:
    """{run_id: {config: {effect: count}}} for each run group (whole_group=False: each run alone), read from SQL; an
    effect a config never had counts 0."""
    out: dict[int, dict[str, Counter[str]]] = {}
    for rid in run_ids:
        ids = run_group(conn, rid) if whole_group else [rid]
        counts: dict[str, Counter[str]] = {}
        if ids:
            rows = conn.execute(
                f"SELECT config, effect, count(*) FROM effects WHERE run_id IN ({','.join('?' * len(ids))})"
                " GROUP BY config, effect", ids)
            for config, effect, n in rows:
                counts.setdefault(config, Counter())[effect] = n
        out[rid] = counts
    return out


def group_items(conn: sqlite3.Connection, run_id: int, models: Iterable[str],
                configs: Iterable[str]) -> list[Outcome]:
    """The outcomes of the run's group for only these models and configs (a few rows, not the whole run)."""
    ids, models, configs = run_group(conn, run_id), list(models), list(configs)
    if not ids or not models or not configs:
        return []
    rows = conn.execute(
        f"SELECT data FROM outcomes WHERE run_id IN ({_marks(ids)}) AND model IN ({_marks(models)})"
        f" AND config IN ({_marks(configs)}) ORDER BY model, config", (*ids, *models, *configs))
    return [Outcome.from_dict(json.loads(r[0])) for r in rows]


def _marks(values: list) -> str:
    return ",".join("?" * len(values))


def latest_baseline(conn: sqlite3.Connection, models: Iterable[str], *, base_settings: dict[str, Any],
                    torch_version: str | None, look_back: int = 50) -> tuple[int, list[Outcome]] | None:
    """(run id, baseline outcomes) of the newest finished run on this torch and base settings that compiled every
    one of `models` at baseline (a sweep, nightly or baseline pass), or None."""
    models = sorted(set(models))
    for n, run in enumerate(runs_mod.finished_runs(conn, (*HISTORY_KINDS, "baseline"))):
        if n >= look_back:
            break
        if run.environment.torch_version != torch_version or (run.base_settings or {}) != base_settings:
            continue
        found = group_items(conn, run.id, models, ["baseline"])
        if {o.model for o in found} == set(models):
            return run.id, found
    return None
