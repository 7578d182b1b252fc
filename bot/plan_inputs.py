"""Read the store into the planner's plain-data inputs (the I/O shell around bot.planner)."""
from __future__ import annotations

import sqlite3
from typing import Any

from bot.planner import PlanInputs
from state import history, links as links_mod, runs as runs_mod

TREND_RUNS = 60


def _diff(conn: sqlite3.Connection, prev_id: int, run_id: int) -> list[dict[str, Any]]:
    """The transitions prev_id → run_id as plain dicts for the planner."""
    from bot.stored_diff import diff_stored

    result = diff_stored(conn, prev_id, run_id)
    return [dict(t.to_dict(), flaky=t.flaky) for t in result.transitions]


def _run_dict(run: runs_mod.Run, models: set[str]) -> dict[str, Any]:
    return {"id": run.id, "date": history.run_date(run)[:10] if run.nightly else history.run_date(run)[:16],
            "environment": run.environment, "configs": run.configs, "base_settings": run.base_settings,
            "options": run.options, "models": sorted(models), "kind": run.kind, "unavailable": run.unavailable}


def gather(conn: sqlite3.Connection, run_id: int, repo: str | None) -> PlanInputs:
    """Everything the planner needs about `run_id`, as of now."""
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        raise KeyError(f"no run {run_id}")
    effects = history.effects(conn, run_id)
    if not effects and history.group_outcomes(conn, run_id):
        history.finalize_run(conn, run_id)      # a run stored but never finalized: effects are derived data
        effects = history.effects(conn, run_id)
    outcomes = history.group_outcomes(conn, run_id)
    prev_id = history.previous_comparable_run(conn, run_id)
    previous, transitions = None, []
    if prev_id is not None:
        prev = runs_mod.get_run(conn, prev_id)
        previous = {"id": prev_id, "date": _run_dict(prev, set())["date"]} if prev else None
        transitions = _diff(conn, prev_id, run_id)
    configs = {e.config for e in effects}
    # Runs up to this one, oldest first, one per group: the axis for quiet counts and trends.
    # A nightly is measured against nightlies only: an ad-hoc sweep of three models is not a quiet night.
    kinds = ("nightly",) if run.kind == "nightly" else history.HISTORY_KINDS
    me = max(history.run_group(conn, run_id))
    latest = history.latest_runs(conn, 500, kinds=kinds)
    groups = {r.id: history.run_group(conn, r.id) or [r.id] for r in latest}
    timeline = [r for r in reversed(latest) if max(groups[r.id]) <= me]
    if not any(max(groups[r.id]) == me for r in timeline):
        groups[run.id] = history.run_group(conn, run_id)
        timeline.append(run)
    model_sets: dict[int, set[str]] = {}

    def models_of(rid: int) -> set[str]:
        if rid not in model_sets:
            model_sets[rid] = history.group_models(conn, rid)
        return model_sets[rid]

    sigs = {(row["config"], row["signature"]): row for row in history.signature_history(conn) if row["config"] in configs}
    quiet: dict[tuple[str, str], int] = {}
    for (config, sig), row in sigs.items():
        # Nightlies (run groups) that had this config and started after the group that last saw the signature.
        last = max(history.run_group(conn, row["last_run"]) or [row["last_run"] or 0])
        # ...that also swept at least one of the models it was last seen on.
        seen_on = set(row.get("models") or [])
        quiet[(config, sig)] = sum(1 for r in timeline if config in r.configs and min(groups[r.id]) > last
                                   and (not seen_on or seen_on & models_of(r.id)))
    recent = timeline[-TREND_RUNS:]
    counts = history.effect_counts(conn, [r.id for r in recent])
    trend = {c: [{"date": _run_dict(r, set())["date"], "counts": counts[r.id].get(c, {})} for r in recent
                 if c in counts.get(r.id, {})] for c in configs}
    links = {k: l.to_dict() for k, l in links_mod.all_links(conn, repo).items()} if repo else \
        {k: l.to_dict() for k, l in links_mod.all_links(conn).items()}
    return PlanInputs(run=_run_dict(run, history.group_models(conn, run_id)), effects=effects, outcomes=outcomes,
                      transitions=transitions, previous=previous, signatures=sigs, quiet=quiet, links=links, trend=trend)
