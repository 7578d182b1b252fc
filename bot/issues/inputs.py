"""Turn a run view into the planner's plain-data inputs (the I/O shell around bot.issues.planner)."""
from __future__ import annotations

import sqlite3
from typing import Any

from harness.core.fixes import MAX_NIGHTS, Night
from bot.issues.material import tracking_key
from bot.issues.planner import PlanInputs
from bot.view.run_view import RunView
from state import history
from state.runs import Run

TREND_RUNS = 60


def _date(run: Run) -> str:
    """A nightly's date, or a run's start time to the minute."""
    return history.run_date(run)[:10] if run.nightly else history.run_date(run)[:16]


def _run_dict(run: Run, models: set[str] | frozenset[str]) -> dict[str, Any]:
    return {"id": run.id, "date": _date(run), "environment": run.environment, "configs": run.configs,
            "base_settings": run.base_settings, "options": run.options, "models": sorted(models), "kind": run.kind,
            "unavailable": run.unavailable}


def gather(conn: sqlite3.Connection, view: RunView) -> PlanInputs:
    """Everything the planner needs about the viewed run: the view, plus the run history for quiet counts and trends."""
    run = view.run
    previous = {"id": view.previous.id, "date": _date(view.previous)} if view.previous else None
    transitions = [dict(t.to_dict(), flaky=t.flaky) for t in view.diff.transitions] if view.diff else []
    configs = {e.config for e in view.effects}
    # Runs up to this one, oldest first, one per group: the axis for quiet counts and trends.
    # A nightly is measured against nightlies only: an ad-hoc sweep of three models is not a quiet night.
    kinds = ("nightly",) if run.kind == "nightly" else history.HISTORY_KINDS
    me = max(view.group)
    latest = history.latest_runs(conn, 500, kinds=kinds)
    groups = {r.id: history.run_group(conn, r.id) or [r.id] for r in latest}
    timeline = [r for r in reversed(latest) if max(groups[r.id]) <= me]
    if not any(max(groups[r.id]) == me for r in timeline):
        groups[run.id] = list(view.group)
        timeline.append(run)
    model_sets: dict[int, set[str]] = {run.id: set(view.models)}

    def models_of(r: Run) -> set[str]:
        if r.id not in model_sets:
            model_sets[r.id] = history.models_of(conn, r)
        return model_sets[r.id]

    sigs = {(row["config"], row["signature"]): row for row in view.signatures if row["config"] in configs}
    quiet: dict[tuple[str, str], int] = {}
    for (config, sig), row in sigs.items():
        # Nightlies (run groups) that had this config and started after the group that last saw the signature.
        last = max(history.run_group(conn, row["last_run"]) or [row["last_run"] or 0])
        # ...that also swept at least one of the models it was last seen on.
        seen_on = set(row.get("models") or [])
        quiet[(config, sig)] = sum(1 for r in timeline if config in r.configs and min(groups[r.id]) > last
                                   and (not seen_on or seen_on & models_of(r)))
    nights = {key: _nights(conn, view, timeline, groups, models_of, *key, row)
              for key, row in sigs.items() if _awaits_fix(view, *key, row)}
    recent = timeline[-TREND_RUNS:]
    counts = history.effect_counts(conn, [r.id for r in recent])
    trend = {c: [{"date": _date(r), "counts": counts[r.id].get(c, {})} for r in recent
                 if c in counts.get(r.id, {})] for c in configs}
    return PlanInputs(run=_run_dict(run, view.models), effects=list(view.effects), outcomes=list(view.outcomes),
                      transitions=transitions, previous=previous, signatures=sigs, quiet=quiet, nights=nights,
                      links={k: link.to_dict() for k, link in view.links.items()}, trend=trend,
                      breaks=dict(view.breaks), leverage=dict(view.leverage),
                      ranges={key: r.to_dict() for key, r in view.ranges.items()},
                      reproducers={key: v.verdict for key, v in view.verdicts.items() if v.verdict},
                      components={key: v.component for key, v in view.verdicts.items() if v.component})


def _awaits_fix(view: RunView, config: str, sig: str, row: dict[str, Any]) -> bool:
    """An open, unmuted tracking issue whose signature this run did not show."""
    link = view.links.get(tracking_key(config, sig))
    return link is not None and link.state == "open" and not link.muted and row.get("last_run") not in view.group


def _nights(conn: sqlite3.Connection, view: RunView, timeline: list[Run], groups: dict[int, list[int]],
            models_of: Any, config: str, sig: str, row: dict[str, Any]) -> list[Night]:
    """The newest nightlies since the signature was last seen, oldest first, with what they did to its models.

    A nightly counts whatever it swept (a missing shard leaves models untested); an ad-hoc run counts only
    when it swept one of the models, so a comment-command sweep of others is no night at all.
    """
    last = max(history.run_group(conn, row["last_run"]) or [row["last_run"] or 0])
    models = list(row.get("models") or [])
    after = [r for r in timeline if config in r.configs and min(groups[r.id]) > last
             and (r.kind == "nightly" or set(models) & models_of(r))][-MAX_NIGHTS:]
    out = []
    for r in after:
        got = {(o.model, o.config): o for o in
               (view.outcomes if max(groups[r.id]) == max(view.group) else history.group_items(conn, r.id, models, ("baseline", config)))}
        out.append(Night(date=_date(r), items={m: (got.get((m, "baseline")), got[(m, config)])
                                               for m in models if (m, config) in got}))
    return out
