"""The readiness table: one row per flag of a run, what it did across the corpus and over the nightlies, plus
what read-set pruning and its audit did, and the config keys this build added or removed.

Plain dicts for templates/report_readiness.*.j2 (the words are there)."""
from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

from bot.issues.keys import tracking_key
from bot.view.run_view import RunView
from harness.core import unsafe
from harness.core.effects import BASELINE, judged
from harness.core.outcome import NOT_READ, POOLED
from state import flags as stored_flags, history

TREND_RUNS = 7      # nightlies shown in a row's trend
COLUMNS = ("reduces_graphs", "increases_graphs", "crashes", "fixes_crash")
# Shown only for a run with judged calls (harness.core.correctness): a run without any reads as it did.
CALL_COLUMNS = ("wrong_result", "fixes_wrong_result", "more_recompiles", "fewer_recompiles")


def _models_read(conn: sqlite3.Connection, view: RunView) -> dict[str, set[str]]:
    """{full key: models whose baseline read it}, over the run's group."""
    read: dict[str, set[str]] = {}
    for rid in view.group:
        for model, keys in stored_flags.reads(conn, rid).items():
            for key in keys:
                read.setdefault(key, set()).add(model)
    return read


def _trend(conn: sqlite3.Connection, view: RunView, config: str) -> list[tuple[int, int]]:
    """(crashes, reduces) of `config` in the last TREND_RUNS runs that had it, oldest first."""
    runs = [r for r in history.latest_runs(conn, TREND_RUNS * 4) if r.id <= view.run.id and config in r.configs]
    counts = history.effect_counts(conn, [r.id for r in runs[:TREND_RUNS]])
    return [(counts[r.id].get(config, Counter())["crashes"], counts[r.id].get(config, Counter())["reduces_graphs"])
            for r in reversed(runs[:TREND_RUNS])]


def _calls(effects: list, settings: dict[str, Any], table: dict[str, unsafe.Unsafe]) -> dict[str, Any]:
    """A flag's correctness and recompile counts, and why it is unsafe by its own documentation (if it is)."""
    counts = Counter(e.correctness for e in effects) + Counter(e.recompile for e in effects)
    return {**{c: counts[c] for c in CALL_COLUMNS}, "unsafe": unsafe.reason(settings, table)}


def rows(conn: sqlite3.Connection, view: RunView) -> list[dict[str, Any]]:
    """One row per flag config of the run (single-key configs: a flag), most crashes first; with the correctness
    and recompile counts where the run judged calls."""
    read = _models_read(conn, view)
    shown, table = judged(view.effects), unsafe.load()
    out = []
    for config, settings in view.run.configs.items():
        if config == BASELINE:
            continue
        effects = [e for e in view.effects if e.config == config]
        counts = Counter(e.effect for e in effects)
        sigs = sorted({e.config_signature for e in effects if e.effect == "crashes" and e.config_signature})
        out.append({
            "config": config, "keys": list(settings),
            "read": len(set().union(*[read.get(k, set()) for k in settings])) if read else None,
            "models": len(effects), "not_read": sum(1 for e in effects if e.reason == NOT_READ),
            "pooled": sum(1 for e in effects if e.reason == POOLED),
            "counts": {c: counts[c] for c in COLUMNS},
            "signatures": [{"signature": s, "link": view.links.get(tracking_key(config, s, view.run.options.sweep.mode))} for s in sigs],
            "trend": _trend(conn, view, config),
            "calls": _calls(effects, settings, table) if shown else None,
        })
    return sorted(out, key=lambda r: (-r["counts"]["crashes"], -r["counts"]["reduces_graphs"], r["config"]))


def context(conn: sqlite3.Connection, view: RunView) -> dict[str, Any]:
    """The readiness section: its rows, the pruning audit, and the config keys added/removed since the last build."""
    audits = [stored_flags.audit_summary(conn, rid) for rid in view.group]
    audited, agreed = sum(a.audited for a in audits), sum(a.agreed for a in audits)
    return {"rows": rows(conn, view), "judged": judged(view.effects),
            "audit": {"audited": audited, "agreed": agreed,
                      "agreement": round(100.0 * agreed / audited, 1) if audited else None,
                      "turned_off": [t for a in audits for t in a.turned_off]},
            "space_change": stored_flags.change_since_previous(conn, view.run.id)}
