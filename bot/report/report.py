"""The run report (HTML or Markdown), the diff as data, exports and run listings.

Code here builds plain dicts; every word and tag is in templates/report_*.j2.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
from typing import Any, Iterable

from bot.report import readiness
from bot.view import run_view
from harness.core.diff import NEWS, TRANSITIONS, DiffResult
from bot.view.run_view import RunView
from bot.view.stored_diff import diff_stored
from bot.text.render import render
from harness.core import defaults, unsafe
from harness.core.effects import calls_table, effect_table, judged
from harness.core.outcome import ANSWERED, EFFECTS, Outcome, skipped
from state import flags as stored_flags, gates, history
from state import runs as runs_mod
from state.history import SignatureRow
from state.resolutions import Tally

BASELINE = "baseline"
# The three lines of the trend chart: (effect, label key used by the template).
TREND_EFFECTS = ("crashes", "reduces_graphs", "no_effect")
EXAMPLE_CHARS = 600




def _run_or_raise(conn: sqlite3.Connection, run_id: int) -> runs_mod.Run:
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        raise LookupError(f"no run {run_id}")
    return run


def _run_summary(conn: sqlite3.Connection, run: runs_mod.Run) -> dict[str, Any]:
    """The few facts about a run every listing shows."""
    env = run.environment
    ids = history.run_group(conn, run.id)
    by_status = runs_mod.status_counts(conn, ids)
    return {
        "id": run.id, "kind": run.kind, "status": run.status, "started_at": run.started_at,
        "finished_at": run.finished_at, "nightly": run.nightly, "shard": run.shard, "group": ids,
        "models": len(history.models_of(conn, run)), "configs": list(run.configs),
        "n_items": sum(by_status.values()), "by_status": by_status,
        "torch_version": env.torch_version, "device": env.device,
    }


def _run_alone(conn: sqlite3.Connection, run: runs_mod.Run) -> dict[str, Any]:
    """What `runs list` and `runs show` say about one run: its own models and items (a shard's, never its group's),
    the group it belongs to (said, not mixed in), and the environment gate's verdict with its reasons."""
    by_status = runs_mod.status_counts(conn, [run.id])
    gate = gates.get(conn, run.id)
    return {
        "id": run.id, "kind": run.kind, "status": run.status, "started_at": run.started_at,
        "finished_at": run.finished_at, "nightly": run.nightly, "shard": run.shard,
        "group": history.run_group(conn, run.id), "models": len(run.models), "configs": list(run.configs),
        "n_items": sum(by_status.values()), "by_status": by_status,
        "torch_version": run.environment.torch_version, "device": run.environment.device,
        "verdict": gate.verdict if gate else None, "gate_reasons": gate.reasons if gate else [],
    }


def runs_summary(conn: sqlite3.Connection, *, limit: int = 20) -> list[dict[str, Any]]:
    """Latest runs first, as plain dicts (what `runs list` prints): each run alone."""
    return [_run_alone(conn, r) for r in runs_mod.list_runs(conn, limit=limit)]


def run_detail(conn: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    """One run alone (a shard: its own items and effects, and which runs its group holds) with its environment,
    settings, gate verdict and its previous comparable run."""
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        return None
    data = run.to_dict()
    data.update(summary=_run_alone(conn, run),
                effects=history.effect_counts(conn, [run_id], whole_group=False)[run_id],
                previous_comparable=history.previous_comparable_run(conn, run_id))
    return data


def _changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: {"before": before.get(k), "after": after.get(k)}
            for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def diff_runs(conn: sqlite3.Connection, run_a: int, run_b: int) -> dict[str, Any]:
    """The diff of two stored runs as the JSON-ready dict `flagsweep diff --json` prints."""
    a, b = _run_or_raise(conn, run_a), _run_or_raise(conn, run_b)
    return _diff_dict(conn, a, b, diff_stored(conn, run_a, run_b))


def _diff_dict(conn: sqlite3.Connection, a: runs_mod.Run, b: runs_mod.Run, result: DiffResult) -> dict[str, Any]:
    models_a, models_b = history.models_of(conn, a), history.models_of(conn, b)
    return {
        "from": a.id, "to": b.id,
        "transitions": [t.to_dict() for t in result.transitions],
        "counts": result.counts(),
        "counts_by_config": result.counts_by_config(),
        "changed_models": result.changed_models(),
        "flaky": [t.to_dict() for t in result.flaky()],
        "comparable": result.comparable,
        "configs": result.configs,
        "not_compared": {"configs_only_from": result.configs_only_before,
                         "configs_only_to": result.configs_only_after,
                         "configs_changed": result.configs_changed},
        "models_only_from": sorted(models_a - models_b), "models_only_to": sorted(models_b - models_a),
        "notes": result.notes,
        "relock": dataclasses.asdict(result.relock) if result.relock else None,
        "base_settings_changed": _changes(a.base_settings, b.base_settings),
        "environment_changed": _changes(a.environment.to_dict(), b.environment.to_dict()),
        "from_run": _run_summary(conn, a), "to_run": _run_summary(conn, b),
    }


def _cell_text(o: Outcome | None, effect: Any | None) -> str:
    if o is None:
        return "–"
    if o.status != "ok":
        return o.status
    if effect is not None and effect.baseline_graphs is not None and o.graphs is not None:
        return f"{effect.baseline_graphs}→{o.graphs}"
    return str(o.graphs)


def _matrix(outs: list[Outcome], effs: list, models: list[str], configs: list[str]) -> list[dict[str, Any]]:
    """Rows of the models × configs matrix: a baseline cell, then one effect cell per flag config."""
    items = {(o.model, o.config): o for o in outs}
    eff = {(e.model, e.config): e for e in effs}
    rows = []
    for model in models:
        base = items.get((model, BASELINE))
        cells = []
        for config in configs:
            o, e = items.get((model, config)), eff.get((model, config))
            cells.append({"config": config, "effect": e.effect if e else ("missing" if o is None else "unclassified"),
                          "text": _cell_text(o, e), "signature": o.signature if o else None,
                          "flaky_rate": o.flaky_rate if o else None})
        rows.append({"model": model, "stratum": (base.stratum if base else None) or "",
                     "baseline": {"status": base.status if base else "missing",
                                  "text": _cell_text(base, None), "signature": base.signature if base else None},
                     "cells": cells})
    return rows


def _signatures(history_rows: Iterable[SignatureRow], outs: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Crash signatures of this run with their models, most models first."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outs:
        if o.crashed:
            groups.setdefault((o.config, o.crash_signature), []).append(o)
    known = {(s.config, s.signature): s for s in history_rows}
    out = []
    for (config, sig), items in groups.items():
        ex = min(items, key=lambda o: (not o.error_message, o.model))
        h = known.get((config, sig))
        out.append({"config": config, "signature": sig, "models": sorted(o.model for o in items),
                    "flaky": sorted(o.model for o in items if o.flaky_rate is not None),
                    "error_type": ex.error_type, "torch_frame": ex.torch_frame,
                    "example": (ex.error_message or "")[:EXAMPLE_CHARS],
                    "first_seen": h.first_seen if h else None, "nightlies_seen": h.nightlies_seen if h else None})
    out.sort(key=lambda s: (-len(s["models"]), s["config"], s["signature"]))
    return out


def trend_chart(labels: list[str], series: dict[str, list[int]], *, width: int = 560, height: int = 180,
                pad: int = 32) -> dict[str, Any]:
    """Geometry of a small line chart (pure): polylines, points and y ticks in SVG coordinates."""
    top = max([1] + [v for vals in series.values() for v in vals])
    n = len(labels)
    inner_w, inner_h = width - 2 * pad, height - 2 * pad

    def x(i: int) -> float:
        return round(pad + (inner_w * i / (n - 1) if n > 1 else inner_w / 2), 1)

    def y(v: int) -> float:
        return round(pad + inner_h - inner_h * v / top, 1)

    lines = []
    for name, vals in series.items():
        pts = [{"x": x(i), "y": y(v), "v": v, "label": labels[i]} for i, v in enumerate(vals)]
        lines.append({"name": name, "points": pts, "path": " ".join(f"{p['x']},{p['y']}" for p in pts)})
    ticks = sorted({0, top // 2, top})
    return {"width": width, "height": height, "pad": pad, "top": top, "lines": lines,
            "ticks": [{"v": t, "y": y(t)} for t in ticks],
            "xlabels": [{"x": x(i), "label": lab} for i, lab in enumerate(labels)],
            "bottom": pad + inner_h, "right": pad + inner_w}


def _trend(conn: sqlite3.Connection, run: runs_mod.Run, configs: list[str], n: int) -> list[dict[str, Any]]:
    """Per flag config, crash/reduce/no-effect counts over the last `n` runs that had that config."""
    runs = [r for r in history.latest_runs(conn, max(n * 4, n)) if r.id <= run.id][:n]
    if run.id not in [r.id for r in runs]:
        runs = ([run] + runs)[:n]
    runs.reverse()
    counts = history.effect_counts(conn, [r.id for r in runs])
    charts = []
    for config in configs:
        with_config = [r for r in runs if config in r.configs]
        labels = [r.nightly or f"#{r.id}" for r in with_config]
        series = {eff: [counts[r.id].get(config, {}).get(eff, 0) for r in with_config] for eff in TREND_EFFECTS}
        charts.append({"config": config, "runs": [r.id for r in with_config], "series": series,
                       "chart": trend_chart(labels, series)})
    return charts


def build_context(conn: sqlite3.Connection, run_id: int | None = None, *, trend_runs: int = 14,
                  view: RunView | None = None, precision: Tally | None = None) -> dict[str, Any]:
    """Everything the report templates show, for one run (default: the latest finished run, or the `view` given).

    The gate, the verify cost and the precision come with the view (precision: a newer tally, e.g. a publish's)."""
    if view is None:
        if run_id is None:
            latest = history.latest_runs(conn, 1)
            if not latest:
                raise LookupError("no finished run in the store yet")
            run_id = latest[0].id
        view = run_view.load(conn, run_id)
    run, outs, effs = view.run, list(view.outcomes), list(view.effects)
    configs = [c for c in run.configs if c != BASELINE] or sorted({o.config for o in outs} - {BASELINE})
    models = sorted({o.model for o in outs} | view.models)
    changes = _diff_dict(conn, view.previous, run, view.diff) if view.previous is not None else None
    if changes is not None:
        news = [t for t in changes["transitions"] if t["transition"] in NEWS and t["flaky_rate"] is None
                and not t["in_note"]]
        changes["news"] = news
        changes["nonzero"] = [{"name": n, "count": c} for n, c in changes["counts"].items() if c]
    return {
        "run": _run_summary(conn, run), "env": run.environment,
        "environment": run.environment.to_dict(), "base_settings": run.base_settings,
        "config_settings": run.configs, "configs": configs, "models": models, "unavailable": run.unavailable,
        "effect_table": [effect_table(effs, c) for c in configs], "effects_list": list(EFFECTS),
        "matrix": _matrix(outs, effs, models, configs), "signatures": _signatures(view.signatures, outs),
        "previous": view.previous.id if view.previous else None, "changes": changes,
        "transition_names": list(TRANSITIONS),
        "trend": _trend(conn, run, configs, trend_runs), "trend_effects": list(TREND_EFFECTS),
        "graph_breaks": [view.breaks[c] for c in configs if c in view.breaks],
        "leverage": [view.leverage[c] for c in [BASELINE, *configs] if c in view.leverage],
        "ranges": [r.to_dict() for _, r in sorted(view.ranges.items()) if r.run_id in view.group],
        "gate": view.gate.to_dict() if view.gate else None,
        "precision": _precision(precision or view.tally),
        "readiness": readiness.context(conn, view),
        "verify_cost": _verify_cost(view),
        "calls": _calls(view, configs, _quarantined(conn, view)) if judged(effs) else None,
        "mode": _mode(run, outs),
    }


def _mode(run: runs_mod.Run, outs: list) -> dict[str, Any] | None:
    """The run's mode where it is not eval (harness.core.modes): its name, the axes it changes, its items and their
    seconds (build and compile); None for eval, whose report reads as before modes."""
    mode = run.options.sweep.mode
    if mode.is_default:
        return None
    seconds = sum((o.build_s or 0.0) + (o.compile_s or 0.0) for o in outs)
    return {"name": mode.name, "changed": mode.changed(), "n_items": len(outs), "seconds": round(seconds, 1),
            "skipped": skipped(outs)}


def _quarantined(conn: sqlite3.Connection, view: RunView) -> list[dict[str, Any]]:
    """The flags whose later calls the run's audit (or an earlier night's) kept off the answer rule."""
    last = max(view.group or (view.run.id,))
    return [dataclasses.asdict(q) for q in stored_flags.quarantined(conn, view.run.nightly, before=last + 1)]


def _calls(view: RunView, configs: list[str], quarantined: list[dict[str, Any]]) -> dict[str, Any]:
    """The correctness and recompile section (a run with judged calls only): per config its counts and whether it
    is unsafe by its own documentation, the run's baseline findings (by cause, every model kept), and the axes'
    changes since the previous run."""
    table = unsafe.load()
    return {"tables": [calls_table(view.effects, c) for c in configs],
            "unsafe": {c: unsafe.reason(view.run.configs.get(c, {}), table) for c in configs},
            "findings": defaults.explain(view.outcomes, view.run.configs, defaults.load()),
            "changes": [t.to_dict() for t in view.diff.axis_news()] if view.diff else [],
            "answered": answered(view, quarantined)}


def answered(view: RunView, quarantined: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """The items whose later calls were answered from the baseline, what the night's audit of them found, and the
    flags under quarantine."""
    return {"count": sum(1 for o in view.outcomes if o.reason == ANSWERED), "audited": len(view.answer_audit),
            "disagreed": [dataclasses.asdict(f) for f in view.answer_audit if f.disagreement],
            "quarantined": list(quarantined)}


def _precision(tally: Tally | None) -> dict[str, Any] | None:
    """The measured precision line's figures (None: no tally, as of a view built by hand)."""
    return tally.to_dict() if tally else None


def _verify_cost(view: RunView) -> dict[str, Any]:
    """Where the verify step's time went: the step as a whole, and each signature's stages, scripts and tries."""
    step = view.verify_cost
    rows = [{"config": config, "signature": signature, "model": rv.verdict.model,
             **dataclasses.asdict(rv.verdict.cost)}
            for (config, signature), rv in sorted(view.verdicts.items())
            if rv.verdict is not None and rv.verdict.cost]
    return {"step": dataclasses.asdict(step) if step else None, "rows": rows}


def render_html(ctx: dict[str, Any]) -> str:
    """The self-contained HTML report."""
    return render("report.html.j2", **ctx)


def render_md(ctx: dict[str, Any]) -> str:
    """The same report in Markdown."""
    return render("report.md.j2", **ctx)


EXPORT_FIELDS = ["run_id"] + list(Outcome.__dataclass_fields__)


def export_rows(conn: sqlite3.Connection, run_id: int) -> list[dict[str, Any]] | None:
    """One dict per outcome of the run itself (a shard's rows only: `merge` makes the whole nightly one run);
    None when there is no such run."""
    if runs_mod.get_run(conn, run_id) is None:
        return None
    return [{"run_id": run_id, **o.to_dict()} for o in runs_mod.outcomes(conn, run_id)]


def to_jsonl(rows: list[dict[str, Any]]) -> str:
    """One JSON object per line."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with a header; list fields are JSON-encoded."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})
    return buf.getvalue()
